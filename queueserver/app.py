"""The HTTP adapter: HTTP in, Dispatcher, HTTP out; plus /metrics, /health, /ready, the test clock and the console.

Every request passes one door first: its body is read here, bounded by its route's limit while it
streams (http_body.py), before anything of the route runs. ROUTES is the table of routes the app
dispatches on, each with its body limit.

The SQS endpoint is a plain ASGI callable that builds the request from the ASGI scope:
it is every request's path, and starlette's Request/Response/routing would cost more than
the protocol work there (docs/benchmarks.md, "Measurements behind code choices").
Starlette serves the rest (the test clock, the console), where convenience matters more.
A browser that opens the server's address (GET / asking for HTML, no action) is sent to the console,
and gets an icon at /favicon.ico; SDKs never ask for either.

The server's own endpoints (/health, /ready, /metrics, the test clock) are server_endpoints.py's, each
through the rule auth/door.py declares for it. A second app serves the metrics listener
(`--metrics-listen`): /metrics, /health and /ready only, unsigned, for a scraper that cannot sign and an
address only it can reach; its bodies pass the same door.
"""

from __future__ import annotations

import time
from importlib.resources import files
from bisect import bisect_left
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from starlette.applications import Starlette
from starlette.routing import Route

from queueserver import errors
from queueserver.auth import Authenticator
from queueserver.browser_guard import BrowserGuard
from queueserver.config import ServerConfig
from queueserver.console import CONSOLE_PREFIX, create_console
from queueserver.http_body import read_rest, refuse_declared_oversize, replay
from queueserver.logs import AccessLog
from queueserver.metrics import Metrics
from queueserver.protocol import Dispatcher, HttpResponse
from queueserver.replication import ReplicationReport
from queueserver.server_endpoints import CLOCK_PATH, ServerEndpoints, headers_of, plain, to_http_request
from queueserver.storage import QueueEngine
from queueserver.tallies import LATENCY_BOUNDS, ConnectionTally, RequestTally

CLOCK_BODY_BYTES = 1024  # {"advance_seconds": N}
_GET = frozenset({"GET"})  # /metrics, /health, /ready and /favicon.ico: no queue URL has one path segment
_OPERATIONS = ("metrics", "health", "ready")  # what the metrics listener serves too


@dataclass(frozen=True)
class RouteRule:
    """A path the app answers (or, with `prefix`, every path under it), the methods it serves there
    (None: any), and the most body bytes the door reads for one of its requests."""

    name: str
    path: str
    body_limit: Callable[[ServerConfig], int]
    methods: frozenset[str] | None = None
    prefix: bool = False


def _body_limit(config: ServerConfig) -> int:
    return config.max_body_bytes


def _form_limit(config: ServerConfig) -> int:
    return min(config.max_form_bytes, config.max_body_bytes)


def _clock_limit(config: ServerConfig) -> int:
    return min(CLOCK_BODY_BYTES, config.max_body_bytes)


# Exact paths first, then prefixes; a request that matches none (any other path, or a method its path
# does not serve) is an SQS request. create_app refuses a rule without a handler.
ROUTES: tuple[RouteRule, ...] = (
    RouteRule("metrics", "/metrics", _body_limit, _GET),
    RouteRule("health", "/health", _body_limit, _GET),
    RouteRule("ready", "/ready", _body_limit, _GET),
    RouteRule("favicon", "/favicon.ico", _body_limit, _GET),
    RouteRule("home", "/", _body_limit, _GET),  # a browser's GET goes to the console; an SDK's is an SQS request
    RouteRule("clock", CLOCK_PATH, _clock_limit),
    RouteRule("console", CONSOLE_PREFIX, _form_limit, prefix=True),  # when the console is on
    RouteRule("sqs", "/", _body_limit, prefix=True),
)


Handler = Callable[[dict[str, Any], dict[str, str], bytes, Any, Any, float], Awaitable[None]]
ASGIApp = Callable[[dict[str, Any], Callable[[], Awaitable[dict[str, Any]]], Callable[[dict[str, Any]], Awaitable[None]]],
                   Awaitable[None]]


def _start_message(response: HttpResponse) -> dict[str, Any]:
    headers = [(b"content-length", str(len(response.body)).encode())]
    headers += [(name.encode("latin-1"), value.encode("latin-1")) for name, value in response.headers.items()]
    return {"type": "http.response.start", "status": response.status, "headers": headers}


async def _send(send: Any, response: HttpResponse) -> None:
    await send(_start_message(response))
    await send({"type": "http.response.body", "body": response.body})


def create_app(config: ServerConfig, engine: QueueEngine, authenticator: Authenticator | None = None,
               connections: ConnectionTally | None = None,
               replication: Callable[[], ReplicationReport] | None = None) -> ASGIApp:
    """The app of the main listener."""
    return create_apps(config, engine, authenticator, connections, replication)[0]


def create_apps(config: ServerConfig, engine: QueueEngine, authenticator: Authenticator | None = None,
                connections: ConnectionTally | None = None,
                replication: Callable[[], ReplicationReport] | None = None) -> tuple[ASGIApp, ASGIApp]:
    """The main listener's app, and the metrics listener's (the same metrics, health and readiness);
    `connections`: the listeners' connection counts, `replication`: the replica's state, for /metrics."""
    dispatcher = Dispatcher(engine, config.region, config.account_id, authenticator)
    guard = BrowserGuard(config.allowed_origins, config.allowed_hosts)
    guards_hosts = bool(config.allowed_hosts)
    default_host = f"{config.host}:{config.port}"
    requests = RequestTally()
    latencies = requests.by_action
    metrics = Metrics(engine, requests, connections or ConnectionTally(), config.metrics_max_queues, replication,
                      None if authenticator is None else lambda: authenticator.unreadable_policies)
    access_log = AccessLog() if config.access_log else None

    async def sqs(scope: dict[str, Any], headers: dict[str, str], body: bytes, receive: Any, send: Any,
                  started: float) -> None:
        http_request = to_http_request(scope, headers, body, default_host)
        http_request.receive = receive  # a long poll learns from it that its client has gone
        reason = cors = None
        if guards_hosts or "origin" in headers or "sec-fetch-site" in headers:  # else the guard has nothing to say
            reason = guard.refusal(headers)
            cors = guard.cors_headers(headers) if reason is None else None
        if reason is not None:
            response = dispatcher.refuse(http_request, errors.AccessDenied(reason))
        elif http_request.method == "OPTIONS" and cors and "access-control-request-method" in headers:
            response = HttpResponse(200, guard.preflight_headers(headers), b"")
        else:
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

    endpoints = ServerEndpoints(engine, dispatcher, authenticator, guard, metrics, replication, default_host)
    extras = Starlette(routes=[Route(CLOCK_PATH, endpoints.clock, methods=["GET", "POST"])])
    console = (create_console(config, engine, guard, authenticator, replication, sns=dispatcher.sns)
               if config.console_enabled else None)
    handlers = _route_handlers(endpoints, guard, extras, console, sqs)
    served = [rule for rule in ROUTES if rule.name in handlers]
    unhandled = {rule.name for rule in ROUTES} - set(handlers) - ({"console"} if console is None else set())
    if unhandled:
        raise RuntimeError(f"routes without a handler: {sorted(unhandled)}")
    exact = {rule.path: rule for rule in served if not rule.prefix}
    prefixed = [(rule.path, rule.path + "/", rule.name) for rule in served if rule.prefix and rule.name != "sqs"]
    limits = {rule.name: rule.body_limit(config) for rule in served}
    sqs_limit = limits["sqs"]

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":  # a WebSocket: starlette closes it
            await extras(scope, receive, send)
            return
        started = time.perf_counter()
        path = scope["path"]
        kind = "sqs"
        found = exact.get(path)
        if found is None:
            for prefix, under, name in prefixed:
                if path == prefix or path.startswith(under):
                    kind = name
                    break
        elif found.methods is None or scope["method"] in found.methods:
            kind = found.name
        # (else: anything but a GET of /metrics, /health or /ready is an SQS request, and gets its error)
        headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}
        # The door: the body, bounded by the route's limit, before anything of the route runs.
        limit = sqs_limit if kind == "sqs" else limits[kind]
        try:
            refuse_declared_oversize(headers, limit)
            message = await receive()
            body = message.get("body", b"")
            # A body in one message (nearly all) is taken here: read_rest's coroutine costs more.
            if message.get("more_body") or message["type"] != "http.request" or len(body) > limit:
                body = await read_rest(receive, limit, message)
        except errors.RequestTooLarge as error:
            await _send(send, refusal(kind, scope, headers, error))
            return
        if body is None:  # the client went away
            return
        await (sqs if kind == "sqs" else handlers[kind])(scope, headers, body, receive, send, started)

    def refusal(kind: str, scope: dict[str, Any], headers: dict[str, str],
                error: errors.RequestTooLarge) -> HttpResponse:
        """413 for a body over the route's limit, in the SQS protocol on its endpoint; the rest is not read."""
        if kind in ("sqs", "home"):
            response = dispatcher.refuse(to_http_request(scope, headers, b"", default_host), error)
        else:
            response = plain(413, error.message)
        response.headers["connection"] = "close"
        return response

    return app, _metrics_listener(endpoints, limits["metrics"])


def _metrics_listener(endpoints: ServerEndpoints, limit: int) -> ASGIApp:
    """The metrics listener's app: GET /metrics, /health and /ready, unsigned; nothing else. Its bodies pass
    the same door as the main listener's."""
    paths = frozenset(rule.path for rule in ROUTES if rule.name in _OPERATIONS)

    async def metrics_listener(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = headers_of(scope)
        try:
            refuse_declared_oversize(headers, limit)
            body = await read_rest(receive, limit, await receive())
        except errors.RequestTooLarge as error:
            response = plain(413, error.message)
            response.headers["connection"] = "close"
            await _send(send, response)
            return
        if body is None:  # the client went away
            return
        if scope["method"] != "GET" or scope["path"] not in paths:
            await _send(send, plain(404, "The metrics listener serves GET /metrics, /health and /ready only."))
            return
        await _send(send, await endpoints.operations(scope, headers, verify=False))

    return metrics_listener


def _route_handlers(endpoints: ServerEndpoints, guard: BrowserGuard, extras: Starlette, console: Starlette | None,
                    sqs: Handler) -> dict[str, Handler]:
    """The handler of each route of ROUTES (the console's only when it is on)."""

    async def operations_route(scope: dict[str, Any], headers: dict[str, str], body: bytes, receive: Any,
                               send: Any, started: float) -> None:
        await _send(send, await endpoints.operations(scope, headers, verify=True))

    async def clock_route(scope: dict[str, Any], headers: dict[str, str], body: bytes, receive: Any,
                          send: Any, started: float) -> None:
        if guard.refusal(headers):  # no web page may move the clock
            await _send(send, HttpResponse(403, {"connection": "close"}, b"refused"))
            return
        await extras(scope, replay(body, receive), send)

    async def console_route(scope: dict[str, Any], headers: dict[str, str], body: bytes, receive: Any,
                            send: Any, started: float) -> None:
        assert console is not None
        await console(scope, replay(body, receive), send)

    icon = HttpResponse(200, {"content-type": "image/x-icon", "cache-control": "max-age=86400"},
                        files("queueserver.console").joinpath("static/favicon.ico").read_bytes())

    async def favicon_route(scope: dict[str, Any], headers: dict[str, str], body: bytes, receive: Any,
                            send: Any, started: float) -> None:
        await _send(send, icon)

    async def home_route(scope: dict[str, Any], headers: dict[str, str], body: bytes, receive: Any,
                         send: Any, started: float) -> None:
        """GET /: a browser's (no action, asks for HTML) is sent to the console; any other is an SQS request."""
        if (console is not None and not scope.get("query_string") and "text/html" in headers.get("accept", "")
                and guard.refusal(headers) is None):
            await _send(send, HttpResponse(302, {"location": CONSOLE_PREFIX + "/", "cache-control": "no-store"}, b""))
            return
        await sqs(scope, headers, body, receive, send, started)

    handlers: dict[str, Handler] = {"metrics": operations_route, "health": operations_route,
                                    "ready": operations_route, "favicon": favicon_route, "home": home_route,
                                    "clock": clock_route, "sqs": sqs}
    if console is not None:
        handlers["console"] = console_route
    return handlers
