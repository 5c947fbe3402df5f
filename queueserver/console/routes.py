"""The console's routes: pages by GET, every change by a CSRF-checked POST that redirects back (PRG)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable
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
from queueserver.console import actions, views
from queueserver.auth import Authenticator
from queueserver.console.access import CSRF_COOKIE, CSRF_FIELD, Access, Viewer
from queueserver.console.calls import SnsCalls, SqsCalls
from queueserver.console.topic_views import TopicPages
from queueserver.errors import ConsoleError
from queueserver.extensions import BROWSE_ACTION, LIST_SUBSCRIPTIONS_ACTION
from queueserver.console.sessions import SESSION_COOKIE, SESSION_SECONDS
from queueserver.models import Queue
from queueserver.protocol.sns.dispatch import SnsDispatcher
from queueserver.replication import ReplicationReport
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


def _queue_path(region: str, account: str, name: str, **query: str) -> str:
    """A queue's (or a subscription's) page: region, account and name, so a link means the same to every viewer."""
    path = f"{CONSOLE_PREFIX}/queues/{quote(region, safe='')}/{quote(account, safe='')}/{quote(name, safe='')}"
    return path + ("?" + urlencode(query) if query else "")


def _arn_path(arn: str) -> str:
    """The page of the queue an ARN names (a RedrivePolicy's deadLetterTargetArn)."""
    parts = arn.split(":")
    return _queue_path(parts[3], parts[4], parts[5]) if len(parts) == 6 else CONSOLE_PREFIX + "/"


def create_console(config: ServerConfig, engine: QueueEngine, guard: BrowserGuard,
                   authenticator: Authenticator | None = None,
                   replication: Callable[[], ReplicationReport] | None = None, *, sns: SnsDispatcher) -> Starlette:
    """The console's app; `sns`: the SNS API's dispatcher, whose door the topic pages and form run through."""
    access = Access(guard, engine, config.account_id, config.region, authenticator)
    calls = SqsCalls(engine, config.region, config.account_id)
    started = time.monotonic()
    fsync = views.FsyncWindow()
    page_tokens = views.PageTokens()
    templates = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(default=True))
    templates.globals.update(queue_path=_queue_path, arn_path=_arn_path, prefix=CONSOLE_PREFIX,
                             sparkline=views.sparkline, spark_width=views.SPARK_WIDTH, spark_height=views.SPARK_HEIGHT,
                             page_size=views.PAGE)

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
        session, refusal = await access.sessions.login(fields.get("access_key_id", ""),
                                                       fields.get("secret_access_key", ""),
                                                       request.client.host if request.client else "")
        if session is None:
            return back(LOGIN_PATH, error=refusal)
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
        """A page of queues in name order (`after` or `before` a page token), whose name starts with `prefix`."""
        query = request.query_params
        sort, descending, name_prefix = query.get("sort", "name"), query.get("dir") == "desc", query.get("prefix", "")
        viewer = access.viewer(request)
        assert viewer is not None  # the app below sends a request without a viewer to the login form
        fsync.note(engine.observe.storage.fsync_seconds)  # an open overview keeps the server page's window
        found = await views.overview(engine, page_tokens, name_prefix, query.get("after", ""), query.get("before", ""),
                                     sort, descending, lambda queue: viewer.may("GetQueueAttributes", queue.arn))
        here = {k: query[k] for k in ("after", "before") if query.get(k)}
        return page(request, "overview.html", rows=found.rows, sort=sort, descending=descending,
                    name_prefix=name_prefix, here=here, earlier=found.before, later=found.after,
                    regions=sorted({config.region, *(r.queue.region for r in found.rows)}),
                    home_region=config.region)

    async def old_queue_page(request: Request) -> Response:
        """/queues/<region>/<name>, the short form without an account: the viewer's own account's queue."""
        viewer = access.viewer(request)
        assert viewer is not None
        path = _queue_path(request.path_params["region"], viewer.account, request.path_params["name"])
        return RedirectResponse(path + (f"?{request.url.query}" if request.url.query else ""), status_code=303)

    def missing(request: Request, region: str, account: str, name: str) -> Response:
        """The answer for a queue that does not exist, and for one the viewer may not see: the same."""
        response = page(request, "missing.html", region=region, account=account, name=name)
        response.status_code = 404
        return response

    async def queue_page(request: Request) -> Response:
        """A queue's page, or a subscription's: any account's, for a viewer the API lets read its attributes."""
        region, account, name = (request.path_params[k] for k in ("region", "account", "name"))
        viewer = access.viewer(request)
        assert viewer is not None
        queue = access.visible_queue(viewer, region, account, name)
        if queue is None:
            return missing(request, region, account, name)
        try:
            shown = await queue_sections(request, viewer, queue)
        except ConsoleError as error:  # e.g. the queue was deleted in between
            return PlainTextResponse(f"{error.code}: {error.message}", 403)
        return page(request, "queue.html", queue=queue, **shown)

    async def queue_sections(request: Request, viewer: Viewer, queue: Queue) -> dict[str, Any]:
        """What the queue page shows: each section only where the viewer may run the action behind it."""
        region, arn, as_viewer = queue.region, queue.arn, viewer.caller
        url = calls.queue_url(region, queue.name, queue.account)
        after = request.query_params.get("after", "")
        shown: dict[str, Any] = {"row": await views.queue_row(engine, queue), "after": after, "messages": None,
                                 "url": calls.queue_url(region, queue.name, queue.account,  # as the endpoint makes it
                                                        f"{request.url.scheme}://{request.headers.get('host', '')}"),
                                 "next_token": None, "tasks": [], "source_names": [], "subscriptions": None,
                                 "tags": queue.tags if viewer.may("ListQueueTags", arn) else None,
                                 "policy_unreadable": access.policy_unreadable(queue)}
        if viewer.may(BROWSE_ACTION, arn):  # its rule: ReceiveMessage too
            browse: dict[str, Any] = {"QueueUrl": url, "MaxNumberOfMessages": BROWSE_PAGE}
            if after:
                browse["NextToken"] = after
            listed = await calls.call(BROWSE_ACTION, region, browse, as_viewer)
            shown["messages"] = [views.message_view(m) for m in listed["Messages"]]
            shown["next_token"] = listed.get("NextToken")
        attributes = (await calls.call("GetQueueAttributes", region, {"QueueUrl": url, "AttributeNames": ["All"]},
                                       as_viewer))["Attributes"]
        redrive = attributes.pop("RedrivePolicy", None)
        shown.update(attributes=views.attributes_view(attributes),
                     redrive_policy=json.loads(redrive) if redrive else None)
        if viewer.may("ListMessageMoveTasks", arn):
            tasks = await calls.call("ListMessageMoveTasks", region, {"SourceArn": arn, "MaxResults": 10}, as_viewer)
            shown["tasks"] = [views.task_view(task) for task in tasks.get("Results", [])]
        if viewer.may("ListDeadLetterSourceQueues", arn):
            sources = (await calls.call("ListDeadLetterSourceQueues", region, {"QueueUrl": url},
                                        as_viewer))["queueUrls"]
            shown["source_names"] = [u.rsplit("/", 1)[-1] for u in sources]
        if queue.subscribed_to is None and viewer.may(LIST_SUBSCRIPTIONS_ACTION, arn):
            shown["subscriptions"] = [await views.queue_row(engine, s) for s in engine.list_subscriptions(queue)
                                      if viewer.may("GetQueueAttributes", s.arn)]
        return shown

    async def server_page(request: Request) -> Response:
        """The server's state; its database path, totals and replica only for a viewer the door admits."""
        viewer = access.viewer(request)
        assert viewer is not None
        details = access.admitted(viewer, "console server page details")
        return page(request, "server.html", info=views.server_info(engine, config.db_path, started, fsync),
                    details=details,
                    replication=None if replication is None or not details else views.replication_view(replication()))

    async def post(request: Request) -> Response:
        """Every state change on a queue or subscription: the path names it and the action; the token must
        match the cookie."""
        fields = await fields_of(request)
        if fields is None:
            return PlainTextResponse("The form's security token is missing or stale: reload the page.", 403)
        viewer = access.viewer(request)
        assert viewer is not None
        target = actions.Target(*(request.path_params[k] for k in ("region", "account", "name")))
        if access.visible_queue(viewer, target.region, target.account, target.name) is None:
            return missing(request, target.region, target.account, target.name)
        here = _queue_path(target.region, target.account, target.name)
        try:
            done = await actions.run(calls, viewer, request.path_params["action"], target, fields)
        except errors.ConsoleRefused as refused:
            return PlainTextResponse(refused.text, refused.status)
        except errors.ConsoleNotConfirmed as unconfirmed:
            return back(here, error=str(unconfirmed))
        except ConsoleError as error:
            return back(here, error=f"{error.code}: {error.message}")
        if done.to_overview:
            return back(CONSOLE_PREFIX, notice=done.notice)
        then = done.then or target
        return back(_queue_path(then.region, then.account, then.name), notice=done.notice)

    async def create(request: Request) -> Response:
        fields = await fields_of(request)
        if fields is None:
            return PlainTextResponse("The form's security token is missing or stale: reload the page.", 403)
        viewer = access.viewer(request)
        assert viewer is not None
        try:
            created = await actions.create_queue(calls, viewer, fields, config.region)
        except errors.ConsoleRefused as refused:
            return PlainTextResponse(refused.text, refused.status)
        except ConsoleError as error:
            return back(CONSOLE_PREFIX, error=f"{error.code}: {error.message}")
        return back(_queue_path(created.region, created.account, created.name), notice=f"Queue {created.name} created.")

    routes = [
        Route("/", overview, methods=["GET"]),
        Route("/server", server_page, methods=["GET"]),
        Route("/login", login_page, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/create", create, methods=["POST"]),
        Route("/queues/{region}/{name}", old_queue_page, methods=["GET"]),
        Route("/queues/{region}/{account}/{name}", queue_page, methods=["GET"]),
        Route("/queues/{region}/{account}/{name}/{action}", post, methods=["POST"]),
        *TopicPages(engine, SnsCalls(engine, sns, config.region, config.account_id), access.viewer, page, fields_of,
                    back, CONSOLE_PREFIX).routes(),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    async def unavailable(request: Request, exc: Exception) -> Response:
        """The storage failing under a page (its counts, its messages): 503, as the API answers."""
        return PlainTextResponse(str(exc), 503, headers={"retry-after": "1"})

    inner = Starlette(routes=[Mount(CONSOLE_PREFIX, routes=routes)],
                      exception_handlers={errors.ServiceUnavailable: unavailable})

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        request = Request(scope, receive)  # its body was read by the app's door, within --max-form-bytes
        reason = access.refusal(request)
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
