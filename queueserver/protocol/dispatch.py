"""The one place that decides a request's protocol and runs its action.

`handle` takes the parts of an HTTP request and returns status, headers and body,
so the HTTP adapter stays thin and a handler never knows which protocol came in.
"""

from __future__ import annotations

import logging
import random
import re
from dataclasses import dataclass
from typing import Any, Awaitable, Callable
from urllib.parse import unquote

from queueserver import errors
from queueserver.auth import Authenticator, Caller, Signed
from queueserver.models import uuid4_string
from queueserver.protocol import extension_actions, json_wire, message_actions as m, query_json, query_wire, queue_actions as q, redrive_actions as r
from queueserver.protocol.error_codes import wire_error
from queueserver.protocol.params import RequestContext
from queueserver.storage import QueueEngine

log = logging.getLogger(__name__)

Handler = Callable[[QueueEngine, RequestContext, dict[str, Any]], Awaitable[dict[str, Any]]]

ACTIONS: dict[str, Handler] = {
    "CreateQueue": q.create_queue,
    "GetQueueUrl": q.get_queue_url,
    "ListQueues": q.list_queues,
    "DeleteQueue": q.delete_queue,
    "GetQueueAttributes": q.get_queue_attributes,
    "SetQueueAttributes": q.set_queue_attributes,
    "PurgeQueue": q.purge_queue,
    "TagQueue": q.tag_queue,
    "UntagQueue": q.untag_queue,
    "ListQueueTags": q.list_queue_tags,
    "AddPermission": q.add_permission,
    "RemovePermission": q.remove_permission,
    "SendMessage": m.send_message,
    "SendMessageBatch": m.send_message_batch,
    "ReceiveMessage": m.receive_message,
    "DeleteMessage": m.delete_message,
    "DeleteMessageBatch": m.delete_message_batch,
    "ChangeMessageVisibility": m.change_message_visibility,
    "ChangeMessageVisibilityBatch": m.change_message_visibility_batch,
    "ListDeadLetterSourceQueues": r.list_dead_letter_source_queues,
    "StartMessageMoveTask": r.start_message_move_task,
    "ListMessageMoveTasks": r.list_message_move_tasks,
    "CancelMessageMoveTask": r.cancel_message_move_task,
    extension_actions.BROWSE_ACTION: extension_actions.browse_messages,
    extension_actions.CREATE_SUBSCRIPTION_ACTION: extension_actions.create_subscription,
    extension_actions.DELETE_SUBSCRIPTION_ACTION: extension_actions.delete_subscription,
    extension_actions.LIST_SUBSCRIPTIONS_ACTION: extension_actions.list_subscriptions,
}

_CREDENTIAL = re.compile(r"Credential=([^/,\s]+)/\d{8}/([^/,\s]+)/")
# A queue URL's path: `/<account>/<name>`, or `/queue/<region>/<account>/<name>` outside the home region.
_QUEUE_PATH = re.compile(r"(?:/queue/[^/]+)?/[^/]+/[^/]+/?")  # used with fullmatch: `$` would let "\n" through
# The actions that act on one queue (they take a QueueUrl): the only ones a queue URL accepts.
_QUEUE_SCOPED = frozenset({
    "GetQueueAttributes", "SetQueueAttributes", "DeleteQueue", "PurgeQueue", "TagQueue", "UntagQueue",
    "ListQueueTags", "AddPermission", "RemovePermission", "SendMessage", "SendMessageBatch", "ReceiveMessage",
    "DeleteMessage", "DeleteMessageBatch", "ChangeMessageVisibility", "ChangeMessageVisibilityBatch",
    "ListDeadLetterSourceQueues", extension_actions.BROWSE_ACTION, extension_actions.CREATE_SUBSCRIPTION_ACTION,
    extension_actions.LIST_SUBSCRIPTIONS_ACTION,
})


@dataclass(slots=True)
class HttpRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-case names
    body: bytes
    scheme: str
    default_host: str
    query_string: str = ""  # raw, still percent-encoded
    client_ip: str = ""
    # Filled in by the dispatcher, for the metrics and the access log.
    action: str = "unknown"  # a known action's name, else "unknown" (a bounded label)
    params: dict[str, Any] | None = None


def _is_json(request: HttpRequest) -> bool:
    return (request.headers.get("x-amz-target", "").startswith("AmazonSQS.")
            or request.headers.get("content-type", "").startswith("application/x-amz-json"))


def _wants_json(request: HttpRequest) -> bool:
    """A Query client that asks for JSON gets the response document rendered as JSON."""
    return "application/json" in request.headers.get("accept", "")


@dataclass(slots=True)
class HttpResponse:
    status: int
    headers: dict[str, str]
    body: bytes


class Dispatcher:
    def __init__(self, engine: QueueEngine, region: str, account: str,
                 authenticator: Authenticator | None = None) -> None:
        self._engine = engine
        self._region = region
        self._account = account
        self._authenticator = authenticator  # None: credentials off, every request is accepted
        self._random = random.Random()  # request ids need no secrecy, and os.urandom costs a syscall each

    def _context(self, request: HttpRequest, request_id: str, action: str, caller: Caller | None,
                 query_credential: str | None = None) -> RequestContext:
        """The credential scope of the Authorization header, or of a Query request's X-Amz-Credential."""
        host = request.headers.get("host") or request.default_host
        if caller is not None:  # verified: the key's account is the caller's namespace
            return RequestContext(region=caller.region, account=caller.account, base_url=f"{request.scheme}://{host}",
                                  request_id=request_id, sender_id=caller.key.key_id, caller=caller, action=action,
                                  home_region=self._region, trace_header=request.headers.get("x-amzn-trace-id"))
        region, sender = self._region, self._account
        match = _CREDENTIAL.search(request.headers.get("authorization", ""))
        if not match and query_credential:
            match = _CREDENTIAL.search(f"Credential={query_credential}")
        if match:
            sender, region = match.group(1), match.group(2)
        return RequestContext(region=region, account=self._account, base_url=f"{request.scheme}://{host}",
                              request_id=request_id, sender_id=sender, home_region=self._region,
                              trace_header=request.headers.get("x-amzn-trace-id"), action=action)

    def authenticate(self, request: HttpRequest) -> Caller | None:
        """The verified caller (None with credentials off); raises the SQS error of a bad signature."""
        if self._authenticator is None:
            return None
        signed = Signed(request.method, request.path, request.query_string, request.headers, request.body,
                        request.scheme == "https")
        return self._authenticator.authenticate(signed, self._engine.clock.now_ms(), request.client_ip)

    async def handle(self, request: HttpRequest) -> HttpResponse:
        request_id = uuid4_string(self._random)
        target = request.headers.get("x-amz-target", "")
        is_json = _is_json(request)
        try:
            caller = None if self._authenticator is None else self.authenticate(request)  # off: not even a call
        except Exception as exc:  # nothing is decoded or run for a request that fails its signature
            if not isinstance(exc, errors.SQSError):
                log.exception("request %s failed unexpectedly in authentication", request_id)
            error = exc if isinstance(exc, errors.SQSError) else errors.InternalError()
            return self._error(request, request_id, error, is_json)
        response = await (self._json(request, request_id, target, caller) if is_json
                          else self._query(request, request_id, caller))
        # The answer is built while the disk syncs; it goes out only once what it reports is durable.
        try:
            await self._engine.durable()
        except errors.SQSError as error:
            return self._error(request, request_id, error, is_json)
        return response

    def refuse(self, request: HttpRequest, error: errors.SQSError) -> HttpResponse:
        """An error answered before the request is read (its body too large, its origin refused)."""
        log.info("request refused: %s", error.message)
        return self._error(request, uuid4_string(self._random), error, _is_json(request))

    def _error(self, request: HttpRequest, request_id: str, error: errors.SQSError, is_json: bool) -> HttpResponse:
        """An error in the request's own wire format (Query as JSON when it asked for that)."""
        if is_json:
            return self._response(request_id, error)
        return self._query_response(request_id, error, _wants_json(request))

    async def _json(self, request: HttpRequest, request_id: str, target: str, caller: Caller | None) -> HttpResponse:
        try:
            action = target.partition(".")[2]
            if not action:
                raise errors.MissingAction("Missing X-Amz-Target header naming the action.")
            handler = ACTIONS.get(action)
            if handler is None:
                raise errors.InvalidAction(f"The action {action} is not valid for this endpoint.")
            request.action = action
            params = request.params = json_wire.decode(request.body)
            self._queue_url_from_path(request, params)
            result = await handler(self._engine, self._context(request, request_id, action, caller), params)
            return HttpResponse(200, self._headers(request_id), json_wire.encode(result))
        except errors.SQSError as error:
            return self._response(request_id, error)
        except Exception:
            log.exception("request %s failed unexpectedly", request_id)
            return self._response(request_id, errors.InternalError())

    async def _query(self, request: HttpRequest, request_id: str, caller: Caller | None) -> HttpResponse:
        """Query/XML: `Action=...` in a form body or query string, POSTed or GET to `/` or a queue URL.

        `Accept: application/json` asks for the same document rendered as JSON."""
        as_json = _wants_json(request)
        try:
            fields = query_wire.request_fields(request.query_string, request.body,
                                               request.headers.get("content-type", ""))
            action = fields.get("Action", "")
            on_queue_url = _QUEUE_PATH.fullmatch(request.path) is not None
            if not action:
                if on_queue_url and request.method == "GET":
                    raise errors.UnknownOperation("")
                raise errors.MissingAction("The request must contain the parameter Action.")
            handler = ACTIONS.get(action)
            if handler is None or (on_queue_url and action not in _QUEUE_SCOPED):
                raise errors.InvalidAction(f"The action {action} is not valid for this endpoint.")
            request.action = action
            params = request.params = query_wire.decode(fields, action)
            self._queue_url_from_path(request, params)
            context = self._context(request, request_id, action, caller, fields.get("X-Amz-Credential"))
            result = await handler(self._engine, context, params)
            if as_json:
                return HttpResponse(200, {"content-type": query_json.CONTENT_TYPE, "x-amzn-requestid": request_id},
                                    query_json.encode(action, result, request_id))
            headers = {"content-type": query_wire.CONTENT_TYPE, "x-amzn-requestid": request_id}
            return HttpResponse(200, headers, query_wire.encode(action, result, request_id))
        except errors.SQSError as error:
            return self._query_response(request_id, error, as_json)
        except Exception:
            log.exception("request %s failed unexpectedly", request_id)
            return self._query_response(request_id, errors.InternalError(), as_json)

    def _queue_url_from_path(self, request: HttpRequest, params: dict[str, Any]) -> None:
        """A request POSTed to a queue URL names that queue when its body does not."""
        if "QueueUrl" in params or not _QUEUE_PATH.fullmatch(request.path):
            return
        host = request.headers.get("host") or request.default_host
        params["QueueUrl"] = f"{request.scheme}://{host}{unquote(request.path.rstrip('/'))}"

    @staticmethod
    def _headers(request_id: str) -> dict[str, str]:
        return {"content-type": json_wire.CONTENT_TYPE, "x-amzn-requestid": request_id}

    def _response(self, request_id: str, error: errors.SQSError) -> HttpResponse:
        wire = wire_error(error)
        extra, body = json_wire.encode_error(error, wire)
        return HttpResponse(wire.status, {**self._headers(request_id), **extra}, body)

    def _query_response(self, request_id: str, error: errors.SQSError, as_json: bool = False) -> HttpResponse:
        wire = wire_error(error)
        if as_json:
            extra, body = query_json.encode_error(error, wire, request_id)
            content_type = query_json.CONTENT_TYPE
        else:
            extra, body = query_wire.encode_error(error, wire, request_id)
            content_type = query_wire.CONTENT_TYPE
        headers = {"content-type": content_type, "x-amzn-requestid": request_id, **extra}
        return HttpResponse(wire.status, headers, body)
