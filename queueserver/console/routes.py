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
from queueserver.console.access import CSRF_COOKIE, CSRF_FIELD, Access
from queueserver.console.calls import ConsoleError, SqsCalls
from queueserver.storage import QueueEngine

CONSOLE_PREFIX = "/console"
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


def create_console(config: ServerConfig, engine: QueueEngine, guard: BrowserGuard) -> Starlette:
    access = Access(guard)
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
            response.set_cookie(CSRF_COOKIE, token, path=CONSOLE_PREFIX, httponly=True, samesite="strict")
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
        rows = [row for row in rows if viewer.may("GetQueueAttributes", row.queue.arn)]
        return page(request, "overview.html", rows=rows, sort=sort, descending=descending, name_filter=name_filter,
                    regions=sorted({config.region, *(r.queue.region for r in rows)}), home_region=config.region)

    async def queue_page(request: Request) -> Response:
        region, name = request.path_params["region"], request.path_params["name"]
        try:
            queue = engine.get_queue(region, config.account_id, name)
        except errors.QueueDoesNotExist:
            return page(request, "missing.html", region=region, name=name)
        if not access.viewer(request).may("GetQueueAttributes", queue.arn):
            return PlainTextResponse("You may not see this queue.", 403)
        row = await views.queue_row(engine, queue)
        url = calls.queue_url(region, name)
        after = request.query_params.get("after", "")
        browse: dict[str, Any] = {"QueueUrl": url, "MaxNumberOfMessages": BROWSE_PAGE}
        if after:
            browse["NextToken"] = after
        try:
            listed = await calls.call("QueueserverBrowseMessages", region, browse)
            attributes = (await calls.call("GetQueueAttributes", region,
                                           {"QueueUrl": url, "AttributeNames": ["All"]}))["Attributes"]
            tasks = (await calls.call("ListMessageMoveTasks", region, {"SourceArn": queue.arn, "MaxResults": 10}))
            sources = (await calls.call("ListDeadLetterSourceQueues", region, {"QueueUrl": url}))["queueUrls"]
        except ConsoleError as error:
            return back(_queue_path(region, name), error=f"{error.code}: {error.message}")
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
        # The console's forms are urlencoded (none uploads a file): parsed here, no multipart library.
        fields = dict(parse_qsl((await request.body()).decode("utf-8", "replace"), keep_blank_values=True))
        if not access.csrf_ok(request, fields.get(CSRF_FIELD, "")):
            return PlainTextResponse("The form's security token is missing or stale: reload the page.", 403)
        region = request.path_params.get("region", fields.get("region", config.region))
        name = request.path_params.get("name", fields.get("name", ""))
        action = request.path_params["action"]
        here = _queue_path(region, name)
        try:
            return await _act(action, region, name, fields, here, access.viewer(request))
        except ConsoleError as error:
            return back(CONSOLE_PREFIX if action == "create" else here, error=f"{error.code}: {error.message}")

    async def _act(action: str, region: str, name: str, fields: dict[str, str], here: str, viewer: Any) -> Response:
        url = calls.queue_url(region, name)
        arn = f"arn:aws:sqs:{region}:{config.account_id}:{name}"
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
                    "deadLetterTargetArn": f"arn:aws:sqs:{region}:{config.account_id}:{fields['dead_letter_queue']}",
                    "maxReceiveCount": fields.get("max_receive_count") or "5"})
            await calls.call("CreateQueue", region, {"QueueName": name, "Attributes": attributes})
            return back(_queue_path(region, name), notice=f"Queue {name} created.")
        if action == "send":
            params: dict[str, Any] = {"QueueUrl": url, "MessageBody": fields.get("body", "")}
            for field in ("MessageGroupId", "MessageDeduplicationId"):
                if fields.get(field):
                    params[field] = fields[field]
            sent = await calls.call("SendMessage", region, params)
            return back(here, notice=f"Message {sent['MessageId']} sent.")
        if action == "purge":
            await calls.call("PurgeQueue", region, {"QueueUrl": url})
            return back(here, notice="Queue purged.")
        if action == "delete":
            await calls.call("DeleteQueue", region, {"QueueUrl": url})
            return back(CONSOLE_PREFIX, notice=f"Queue {name} deleted.")
        if action == "redrive":
            move: dict[str, Any] = {"SourceArn": arn}
            if fields.get("rate"):  # SQS validates it (1-500)
                move["MaxNumberOfMessagesPerSecond"] = int(fields["rate"]) if fields["rate"].isdigit() else -1
            started_task = await calls.call("StartMessageMoveTask", region, move)
            return back(here, notice=f"Redrive started (task {started_task['TaskHandle'][:12]}…).")
        await calls.call("CancelMessageMoveTask", region, {"TaskHandle": fields.get("task_handle", "")})
        return back(here, notice="Redrive cancelled.")

    routes = [
        Route("/", overview, methods=["GET"]),
        Route("/server", server_page, methods=["GET"]),
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
        if scope["path"] == CONSOLE_PREFIX:
            scope = dict(scope, path=CONSOLE_PREFIX + "/")
        await inner(scope, receive, send)

    return app  # type: ignore[return-value]
