"""The console's routes: pages by GET, every change by a CSRF-checked POST that redirects back (PRG)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from queueserver import errors
from queueserver.browser_guard import BrowserGuard
from queueserver.config import ServerConfig
from queueserver.console import views
from queueserver.auth import Authenticator
from queueserver.console.access import CSRF_COOKIE, CSRF_FIELD, Access, Viewer
from queueserver.console.calls import SqsCalls
from queueserver.errors import ConsoleError
from queueserver.extensions import BROWSE_ACTION
from queueserver.console.sessions import SESSION_COOKIE, SESSION_SECONDS
from queueserver.storage import QueueEngine

CONSOLE_PREFIX = "/console"
LOGIN_PATH = CONSOLE_PREFIX + "/login"
BROWSE_PAGE = 20
HERE = Path(__file__).resolve().parent
# No inline script or style may run: a body that slipped past escaping still could not execute.
_SECURITY_HEADERS = {
    "content-security-policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'",
    "x-frame-options": "DENY", "x-content-type-options": "nosniff", "referrer-policy": "same-origin",
    "cache-control": "no-store",
}


def _queue_path(region: str, name: str, **query: str) -> str:
    path = f"{CONSOLE_PREFIX}/queues/{quote(region, safe='')}/{quote(name, safe='')}"
    return path + ("?" + urlencode(query) if query else "")


def create_console(config: ServerConfig, engine: QueueEngine, guard: BrowserGuard,
                   authenticator: Authenticator | None = None) -> Starlette:
    access = Access(guard, engine, config.account_id, config.region, authenticator)
    calls = SqsCalls(engine, config.region, config.account_id)
    started = time.monotonic()
    templates = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True))
    templates.globals.update(queue_path=_queue_path, prefix=CONSOLE_PREFIX, sparkline=views.sparkline,
                             spark_width=views.SPARK_WIDTH, spark_height=views.SPARK_HEIGHT)

    def page(request: Request, template: str, **context: Any) -> Response:
        token, new = access.csrf_token(request)
        html = templates.get_template(template).render(
            csrf_field=CSRF_FIELD, csrf_token=token, viewer=access.viewer(request),
            notice=request.query_params.get("notice", ""), error=request.query_params.get("error", ""), **context)
        response = HTMLResponse(html, headers=_SECURITY_HEADERS)
        if new:
            response.set_cookie(CSRF_COOKIE, token, path=CONSOLE_PREFIX, httponly=True, samesite="strict",
                                secure=request.url.scheme == "https")
        return response

    async def fields_of(request: Request) -> dict[str, str] | None:
        """The form's fields, or None when its CSRF token does not match the cookie."""
        # The console's forms are urlencoded (none uploads a file): parsed here, no multipart library.
        fields = dict(parse_qsl((await request.body()).decode("utf-8", "replace"), keep_blank_values=True))
        return fields if access.csrf_ok(request, fields.get(CSRF_FIELD, "")) else None

    async def login_page(request: Request) -> Response:
        return page(request, "login.html")

    async def login(request: Request) -> Response:
        fields = await fields_of(request)
        if fields is None or access.sessions is None:
            return PlainTextResponse("The form's security token is missing or stale: reload the page.", 403)
        session = await access.sessions.login(fields.get("access_key_id", ""), fields.get("secret_access_key", ""))
        if session is None:
            return back(LOGIN_PATH, error="The access key ID or the secret access key is wrong.")
        response = back(CONSOLE_PREFIX + "/")
        response.set_cookie(SESSION_COOKIE, session, max_age=SESSION_SECONDS, path=CONSOLE_PREFIX, httponly=True,
                            samesite="strict", secure=request.url.scheme == "https")
        return response

    async def logout(request: Request) -> Response:
        if await fields_of(request) is None:
            return PlainTextResponse("The form's security token is missing or stale: reload the page.", 403)
        if access.sessions is not None:
            access.sessions.logout(request.cookies.get(SESSION_COOKIE, ""))
        response = back(LOGIN_PATH, notice="Logged out.")
        response.delete_cookie(SESSION_COOKIE, path=CONSOLE_PREFIX)
        return response

    def back(path: str, notice: str = "", error: str = "") -> Response:
        query = urlencode({k: v for k, v in (("notice", notice), ("error", error)) if v})
        sep = "&" if "?" in path else "?"
        return RedirectResponse(path + (sep + query if query else ""), status_code=303)

    async def overview(request: Request) -> Response:
        sort = request.query_params.get("sort", "name")
        descending = request.query_params.get("dir") == "desc"
        name_filter = request.query_params.get("q", "")
        rows = await views.overview(engine, name_filter, sort, descending)
        viewer = access.viewer(request)
        assert viewer is not None  # the app below sends a request without a viewer to the login form
        rows = [row for row in rows if viewer.may("GetQueueAttributes", row.queue.arn)]
        return page(request, "overview.html", rows=rows, sort=sort, descending=descending, name_filter=name_filter,
                    regions=sorted({config.region, *(r.queue.region for r in rows)}), home_region=config.region)

    async def queue_page(request: Request) -> Response:
        region, name = request.path_params["region"], request.path_params["name"]
        viewer = access.viewer(request)
        assert viewer is not None
        try:
            queue = engine.get_queue(region, viewer.account, name)
        except errors.QueueDoesNotExist:
            return page(request, "missing.html", region=region, name=name)
        if not viewer.may("GetQueueAttributes", queue.arn):
            return PlainTextResponse("You may not see this queue.", 403)
        row = await views.queue_row(engine, queue)
        url = calls.queue_url(region, name, viewer.account)
        after = request.query_params.get("after", "")
        browse: dict[str, Any] = {"QueueUrl": url, "MaxNumberOfMessages": BROWSE_PAGE}
        if after:
            browse["NextToken"] = after
        try:
            as_viewer = viewer.caller
            listed = await calls.call(BROWSE_ACTION, region, browse, as_viewer)
            attributes = (await calls.call("GetQueueAttributes", region,
                                           {"QueueUrl": url, "AttributeNames": ["All"]}, as_viewer))["Attributes"]
            tasks = await calls.call("ListMessageMoveTasks", region, {"SourceArn": queue.arn, "MaxResults": 10},
                                     as_viewer) if viewer.may("ListMessageMoveTasks", queue.arn) else {}
            sources = (await calls.call("ListDeadLetterSourceQueues", region, {"QueueUrl": url},
                                        as_viewer))["queueUrls"]
        except ConsoleError as error:  # e.g. a key that may see the queue but not browse it (no redirect loop)
            return PlainTextResponse(f"{error.code}: {error.message}", 403)
        redrive = attributes.pop("RedrivePolicy", None)
        return page(request, "queue.html", queue=queue, row=row, attributes=attributes,
                    redrive_policy=json.loads(redrive) if redrive else None, tags=queue.tags,
                    messages=[views.message_view(m) for m in listed["Messages"]],
                    next_token=listed.get("NextToken"), after=after,
                    tasks=tasks.get("Results", []), source_names=[u.rsplit("/", 1)[-1] for u in sources])

    async def server_page(request: Request) -> Response:
        return page(request, "server.html", info=views.server_info(engine, config.db_path, started))

    async def post(request: Request) -> Response:
        """Every state change: one form field names the action; the token must match the cookie."""
        fields = await fields_of(request)
        if fields is None:
            return PlainTextResponse("The form's security token is missing or stale: reload the page.", 403)
        region = request.path_params.get("region", fields.get("region", config.region))
        name = request.path_params.get("name", fields.get("name", ""))
        action = request.path_params["action"]
        here = _queue_path(region, name)
        viewer = access.viewer(request)
        assert viewer is not None
        try:
            return await _act(action, region, name, fields, here, viewer)
        except ConsoleError as error:
            return back(CONSOLE_PREFIX if action == "create" else here, error=f"{error.code}: {error.message}")

    async def _act(action: str, region: str, name: str, fields: dict[str, str], here: str, viewer: Viewer
                   ) -> Response:
        url = calls.queue_url(region, name, viewer.account)
        arn = f"arn:aws:sqs:{region}:{viewer.account}:{name}"
        caller = viewer.caller
        sqs_action = {"create": "CreateQueue", "send": "SendMessage", "purge": "PurgeQueue", "delete": "DeleteQueue",
                      "redrive": "StartMessageMoveTask", "cancel": "CancelMessageMoveTask"}.get(action)
        if sqs_action is None:
            return PlainTextResponse("No such console action.", 404)
        if not viewer.may(sqs_action, arn):
            return PlainTextResponse(f"You may not {sqs_action} on this queue.", 403)
        if action in ("purge", "delete") and fields.get("confirm", "") != name:
            return back(here, error=f"Type the queue name ({name}) to confirm.")
        if action == "create":
            attributes: dict[str, str] = {}
            if fields.get("fifo"):
                attributes["FifoQueue"] = "true"
            if fields.get("dead_letter_queue"):
                attributes["RedrivePolicy"] = json.dumps({
                    "deadLetterTargetArn": f"arn:aws:sqs:{region}:{viewer.account}:{fields['dead_letter_queue']}",
                    "maxReceiveCount": fields.get("max_receive_count") or "5"})
            await calls.call("CreateQueue", region, {"QueueName": name, "Attributes": attributes}, caller)
            return back(_queue_path(region, name), notice=f"Queue {name} created.")
        if action == "send":
            params: dict[str, Any] = {"QueueUrl": url, "MessageBody": fields.get("body", "")}
            for field in ("MessageGroupId", "MessageDeduplicationId"):
                if fields.get(field):
                    params[field] = fields[field]
            sent = await calls.call("SendMessage", region, params, caller)
            return back(here, notice=f"Message {sent['MessageId']} sent.")
        if action == "purge":
            await calls.call("PurgeQueue", region, {"QueueUrl": url}, caller)
            return back(here, notice="Queue purged.")
        if action == "delete":
            await calls.call("DeleteQueue", region, {"QueueUrl": url}, caller)
            return back(CONSOLE_PREFIX, notice=f"Queue {name} deleted.")
        if action == "redrive":
            move: dict[str, Any] = {"SourceArn": arn}
            if fields.get("rate"):  # SQS validates it (1-500)
                move["MaxNumberOfMessagesPerSecond"] = int(fields["rate"]) if fields["rate"].isdigit() else -1
            started_task = await calls.call("StartMessageMoveTask", region, move, caller)
            return back(here, notice=f"Redrive started (task {started_task['TaskHandle'][:12]}…).")
        await calls.call("CancelMessageMoveTask", region, {"TaskHandle": fields.get("task_handle", "")}, caller)
        return back(here, notice="Redrive cancelled.")

    routes = [
        Route("/", overview, methods=["GET"]),
        Route("/server", server_page, methods=["GET"]),
        Route("/login", login_page, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/queues/{region}/{name}", queue_page, methods=["GET"]),
        Route("/queues/{region}/{name}/{action}", post, methods=["POST"]),
        Route("/{action}", post, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    inner = Starlette(routes=[Mount(CONSOLE_PREFIX, routes=routes)])

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        request = Request(scope, receive)
        reason = access.refusal(request)
        declared = request.headers.get("content-length", "0")
        if reason is None and (not declared.isdigit() or int(declared) > config.max_body_bytes):
            reason = "The form is too large."
        if reason is not None:
            await PlainTextResponse(reason, 403)(scope, receive, send)
            return
        path = scope["path"]
        if (path != LOGIN_PATH and not path.startswith(CONSOLE_PREFIX + "/static/")
                and access.viewer(request) is None):  # with credentials: no page, no form before logging in
            redirect = RedirectResponse(LOGIN_PATH, status_code=303) if request.method == "GET" else \
                PlainTextResponse("Log in first.", 403)
            await redirect(scope, receive, send)
            return
        if scope["path"] == CONSOLE_PREFIX:
            scope = dict(scope, path=CONSOLE_PREFIX + "/")
        await inner(scope, receive, send)

    return app  # type: ignore[return-value]
