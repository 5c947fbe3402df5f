"""The standby role: a server that follows a replica, and takes over writing when promoted.

`queueserver standby --from URL` listens on its port at once, with Litestream's follow mode
(replication/follower.py) keeping a copy of the newest generation current. Until promoted its
listener answers /health, /ready (503, `"status": "standby"`, with the copy's lag), /metrics
(role, generation, lag) and the promotion itself; SQS requests and the console are answered from
a snapshot of the copy behind a read-only door (standby_reads.py): reads answer, every write gets
a 503 ServiceUnavailable naming the standby state, which every SDK retries.

Promotion (POST PROMOTE_PATH, `queueserver promote`, or SIGUSR1): the copy applies what the
replica holds, Litestream stops following, the snapshots close, SQLite's quick check runs on the
copy, the copy takes the next generation, the engine opens on it and Litestream replicates it to
that generation's path; then the listener's app is replaced by the primary's, on the same port,
in the same process. A second request answers that the server is already the primary (an
orchestrator may retry).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
import uuid
from typing import Any, Awaitable, Callable

from queueserver import errors
from queueserver.errors import StartupError
from queueserver.auth import Authenticator, Signed
from queueserver.extensions import PROMOTE_PATH
from queueserver.http_body import read_rest, refuse_declared_oversize, replay
from queueserver.metrics import standby_exposition
from queueserver.protocol.codecs import HttpResponse, codec_for
from queueserver.protocol.error_codes import wire_error
from queueserver.replication.follower import CATCH_UP_SECONDS, Follower, copy_files
from queueserver.standby_reads import ReadOnlyEngine, Snapshots
from queueserver.storage.generation import check_and_take

log = logging.getLogger(__name__)

# The standby's own routes, each with the door's rules it passes (auth/door.py: STANDBY_ROUTE_DOORS).
STANDBY_ROUTES = frozenset({"GET /health", "GET /ready", "GET /metrics", f"POST {PROMOTE_PATH}"})
ASGIApp = Callable[[dict[str, Any], Any, Any], Awaitable[None]]
OpenPrimary = Callable[[int], Awaitable[tuple[ASGIApp, ASGIApp]]]


class Switch:
    """A listener's app, which a promotion replaces once (a standby's listeners are built on it; a server
    started as the primary is not, so its requests pay for no indirection)."""

    __slots__ = ("app",)

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


def _operational(scope: dict[str, Any]) -> bool:
    """/health, /ready, /metrics and the promotion: the standby's own, never the snapshot's."""
    return f"{scope['method']} {scope['path']}" in STANDBY_ROUTES


def _json(status: int, document: dict[str, Any]) -> HttpResponse:
    return HttpResponse(status, {"content-type": "application/json", "cache-control": "no-store"},
                        json.dumps(document).encode())


async def _send(send: Any, response: HttpResponse) -> None:
    headers = [(b"content-length", str(len(response.body)).encode())]
    headers += [(k.encode("latin-1"), v.encode("latin-1")) for k, v in response.headers.items()]
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": response.body})


class Standby:
    """The follower, the standby's answers, and the promotion into `open_primary(generation)`'s apps."""

    def __init__(self, follower: Follower, db_path: str, body_limit: int,
                 authenticator: Authenticator | None, open_primary: OpenPrimary,
                 open_reader: Callable[[ReadOnlyEngine], ASGIApp]) -> None:
        self.follower = follower
        self.snapshots = Snapshots(db_path, lambda: follower.status.position if follower.status.following else None,
                                   open_reader, self._refusal_error)
        self._refreshing: asyncio.Task | None = None
        self._written: int | None = None  # promoted: the generation written
        self._db_path = db_path
        self._body_limit = body_limit
        self._authenticator = authenticator
        self._open_primary = open_primary
        self._lock = asyncio.Lock()
        self.promoted = False
        self.main = Switch(self._app)
        self.metrics = Switch(self._metrics_app)

    async def start(self) -> None:
        await self.follower.start()
        self._refreshing = asyncio.create_task(self.snapshots.run(), name="standby snapshots")

    async def close(self) -> None:
        """At shutdown, or at promotion: no more snapshots (the follower is stopped by its owner)."""
        if self._refreshing is not None:
            self._refreshing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._refreshing
        await self.snapshots.close()

    def _refusal_error(self) -> errors.SQSError:
        report = self.follower.report()
        return errors.ServiceUnavailable(
            f"this server is a standby following {report.replica} (generation {report.generation}): it answers "
            "reads only until promoted; retry, or send writes to the primary")

    async def promote(self) -> tuple[int, dict[str, Any]]:
        """Take over writing (see the module's docstring); (HTTP status, what to answer)."""
        async with self._lock:
            if self.promoted:
                return 200, {"role": "primary", "generation": self._written, "message": "already the primary"}
            if not self.follower.status.following:
                return 503, {"role": "standby", "message": "not promoted: the standby has not restored the replica "
                                                           "yet (GET /ready says when it follows)"}
            began = time.monotonic()
            if not await self.follower.catch_up(CATCH_UP_SECONDS):
                log.warning("promotion: the copy did not reach the replica's newest point within %g s",
                            CATCH_UP_SECONDS)
            log.warning("promotion: stopping Litestream's follow mode at transaction %s (caught up in %.2f s)",
                        self.follower.status.position, time.monotonic() - began)
            await self.follower.stop()
            await self.close()
            generation = self.follower.generation + 1
            if await asyncio.get_running_loop().run_in_executor(None, self.follower.generation_exists, generation):
                log.error("promotion refused: the replica already has generation %d; following it again",
                          generation)
                await self.start()
                return 409, {"role": "standby", "message": f"not promoted: the replica already has generation "
                                                           f"{generation}, written by another promoted server; this "
                                                           "standby follows it now"}
            verdict = await asyncio.get_running_loop().run_in_executor(None, check_and_take, self._db_path,
                                                                       generation)
            if verdict != "ok":
                log.error("promotion refused: the standby's copy failed SQLite's quick check: %s; restoring it "
                          "again and following", verdict)
                await self.start()  # every start of the follower restores the copy afresh
                return 500, {"role": "standby", "message": f"not promoted: the copy failed its check ({verdict}); "
                                                           "it is restored again"}
            os.remove(copy_files(self._db_path)[-1])  # no longer a copy: a later standby must not remove it
            try:
                main, metrics = await self._open_primary(generation)
            except Exception as exc:  # noqa: BLE001 - said to the caller and logged; the process stays up
                log.error("promotion failed: %s; restart the standby", exc, exc_info=not isinstance(exc, StartupError))
                return 500, {"role": "standby", "message": f"promotion failed: {exc}; restart the standby"}
            self._written, self.promoted = generation, True
            self.main.app, self.metrics.app = self._primary_app(main), metrics
            log.warning("promoted in %.2f s: this server is the primary, writing replica generation %d",
                        time.monotonic() - began, generation)
            return 200, {"role": "primary", "generation": generation, "message": "promoted"}

    def _primary_app(self, main: ASGIApp) -> ASGIApp:
        """The primary's app, which answers a repeated promotion (an orchestrator retrying) with success."""
        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if scope["type"] == "http" and scope["path"] == PROMOTE_PATH and scope["method"] == "POST":
                await self._app(scope, receive, send)
                return
            await main(scope, receive, send)

        return app

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        try:  # the door: the body, bounded, before anything runs
            refuse_declared_oversize(headers, self._body_limit)
            body = await read_rest(receive, self._body_limit, await receive())
        except errors.RequestTooLarge as error:
            await _send(send, HttpResponse(413, {"connection": "close"}, error.message.encode()))
            return
        if body is None:
            return
        reader = self.snapshots.app
        if reader is not None and not _operational(scope):  # an SQS request or the console: the snapshot's
            await reader(scope, replay(body, receive), send)
            return
        await _send(send, await self._answer(scope, headers, body, verify=True))

    async def _metrics_app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["method"] != "GET" or scope["path"] not in ("/metrics", "/health", "/ready"):
            await _send(send, HttpResponse(404, {}, b"The metrics listener serves GET /metrics, /health and /ready."))
            return
        await _send(send, await self._answer(scope, {}, b"", verify=False))

    async def _answer(self, scope: dict[str, Any], headers: dict[str, str], body: bytes,
                      verify: bool) -> HttpResponse:
        path, method = scope["path"], scope["method"]
        report = self.follower.report()
        if method == "GET" and path == "/health":
            return _json(200, {"status": "ok"})
        if method == "GET" and path == "/ready":  # the replica's URL and errors only to whom may see metrics
            detailed = not verify or self._refusal(scope, headers, body, "GET /ready details") is None
            return _json(503, {"status": "standby", **({"replication": report.as_dict()} if detailed else {})})
        if method == "GET" and path == "/metrics":
            refused = self._refusal(scope, headers, body, "GET /metrics") if verify else None
            if refused is not None:
                return refused
            exposition, content_type = standby_exposition(report, headers.get("accept", ""))
            return HttpResponse(200, {"content-type": content_type}, exposition)
        if method == "POST" and path == PROMOTE_PATH:
            refused = self._refusal(scope, headers, body, f"POST {PROMOTE_PATH}")
            if refused is not None:
                return refused
            status, document = await self.promote()
            return _json(status, document)
        return codec_for(headers).render_error(str(uuid.uuid4()), self._refusal_error())  # no snapshot yet

    def _refusal(self, scope: dict[str, Any], headers: dict[str, str], body: bytes,
                 way: str) -> HttpResponse | None:
        """With credentials on: a valid signature, and the door's rule of `way` (auth/door.py) passed."""
        if self._authenticator is None:
            return None
        signed = Signed(scope["method"], scope["path"], scope.get("query_string", b"").decode("latin-1"), headers,
                        body, scope.get("scheme") == "https")
        now_ms = time.time_ns() // 1_000_000
        try:
            caller = self._authenticator.authenticate(signed, now_ms, (scope.get("client") or ("", 0))[0])
            caller.admit_server(way)
        except errors.SQSError as error:
            return _json(wire_error(error).status, {"code": wire_error(error).query_code, "message": error.message})
        return None
