"""The one place that decides a request's protocol and runs its action.

`handle` takes the parts of an HTTP request and returns status, headers and body,
so the HTTP adapter stays thin and a handler never knows which protocol came in.
Every protocol takes the same path (`Dispatcher._run`: authenticate, find and check the
action, decode, pass the authorization door (protocol/door.py), run, render); `codecs.py` holds only what differs between them.
"""

from __future__ import annotations

import logging
import random
import re
from dataclasses import dataclass
from typing import Any, Awaitable, Callable
from urllib.parse import unquote

from queueserver import errors
from queueserver import extensions as ext
from queueserver.auth import Authenticator, Principal, Signed
from queueserver.auth.sigv4 import invalid_region
from queueserver.client_connection import Receive
from queueserver.limits import REGION_NAME
from queueserver.models import uuid4_string
from queueserver.protocol import extension_actions, message_actions as m, queue_actions as q, redrive_actions as r
from queueserver.protocol.codecs import Codec, HttpResponse, codec_for
from queueserver.protocol.door import OPEN_DOORS, admit
from queueserver.protocol.params import RequestContext
from queueserver.protocol.sns.dispatch import SnsDispatcher, addressed_to_sns, is_certificate_request
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
    ext.BROWSE_ACTION: extension_actions.browse_messages,
    ext.CREATE_SUBSCRIPTION_ACTION: extension_actions.create_subscription,
    ext.DELETE_SUBSCRIPTION_ACTION: extension_actions.delete_subscription,
    ext.LIST_SUBSCRIPTIONS_ACTION: extension_actions.list_subscriptions,
}

# An unverified credential scope (credentials off): the key id, and the region, or (group 3) a region that is none.
_CREDENTIAL = re.compile(rf"Credential=([^/,\s]+)/\d{{8}}/(?:({REGION_NAME})|([^/,\s]+))/")
# A queue URL's path: `/<account>/<name>`, or `/queue/<region>/<account>/<name>` outside the home region.
_QUEUE_PATH = re.compile(r"(?:/queue/[^/]+)?/[^/]+/[^/]+/?")  # used with fullmatch: `$` would let "\n" through
# The actions a queue URL accepts: those that act on one queue (they take a QueueUrl), and GetQueueUrl,
# which SQS answers there with the URL of the queue it names, whatever queue the path names.
_QUEUE_URL_ACTIONS = frozenset({
    "GetQueueUrl",
    "GetQueueAttributes", "SetQueueAttributes", "DeleteQueue", "PurgeQueue", "TagQueue", "UntagQueue",
    "ListQueueTags", "AddPermission", "RemovePermission", "SendMessage", "SendMessageBatch", "ReceiveMessage",
    "DeleteMessage", "DeleteMessageBatch", "ChangeMessageVisibility", "ChangeMessageVisibilityBatch",
    "ListDeadLetterSourceQueues", ext.BROWSE_ACTION, ext.CREATE_SUBSCRIPTION_ACTION,
    ext.LIST_SUBSCRIPTIONS_ACTION,
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
    receive: Receive | None = None  # the ASGI receive channel, its body read: it says when the client hangs up
    # Filled in by the dispatcher, for the metrics and the access log.
    action: str = "unknown"  # a known action's name, else "unknown" (a bounded label)
    params: dict[str, Any] | None = None


class Dispatcher:
    def __init__(self, engine: QueueEngine, region: str, account: str,
                 authenticator: Authenticator | None = None) -> None:
        self._engine = engine
        self._region = region
        self._account = account
        self._authenticator = authenticator  # None: credentials off, every request is accepted
        self._random = random.Random()  # request ids need no secrecy, and os.urandom costs a syscall each
        self._sns = SnsDispatcher(engine, authenticator is not None)  # topics: the SNS API (protocol/sns/)

    @property
    def sns(self) -> SnsDispatcher:
        """The SNS API's dispatcher: its door, actions and signer, which the console's topic forms run through."""
        return self._sns

    def _context(self, request: HttpRequest, request_id: str, action: str, caller: Principal | None,
                 query_credential: str | None = None) -> RequestContext:
        """The credential scope of the Authorization header, or of a Query request's X-Amz-Credential."""
        host = request.headers.get("host") or request.default_host
        if caller is not None:  # verified: the key's account is the caller's namespace
            return RequestContext(region=caller.region, account=caller.account, base_url=f"{request.scheme}://{host}",
                                  request_id=request_id, sender_id=caller.key.key_id, caller=caller, action=action,
                                  home_region=self._region, trace_header=request.headers.get("x-amzn-trace-id"),
                                  receive=request.receive)
        region, sender = self._region, self._account
        match = _CREDENTIAL.search(request.headers.get("authorization", ""))
        if not match and query_credential:
            match = _CREDENTIAL.search(f"Credential={query_credential}")
        if match:
            sender, region, invalid = match.groups()
            if invalid is not None:
                raise invalid_region(invalid)
        return RequestContext(region=region, account=self._account, base_url=f"{request.scheme}://{host}",
                              request_id=request_id, sender_id=sender, home_region=self._region,
                              trace_header=request.headers.get("x-amzn-trace-id"), action=action,
                              receive=request.receive)

    def authenticate(self, request: HttpRequest) -> Principal | None:
        """The verified caller (None with credentials off); raises the SQS error of a bad signature."""
        if self._authenticator is None:
            return None
        signed = Signed(request.method, request.path, request.query_string, request.headers, request.body,
                        request.scheme == "https")
        return self._authenticator.authenticate(signed, self._engine.clock.now_ms(), request.client_ip)

    async def handle(self, request: HttpRequest) -> HttpResponse:
        request_id = uuid4_string(self._random)
        if addressed_to_sns(request.headers, request.path, request.query_string):
            return await self._handle_sns(request, request_id)
        codec = codec_for(request.headers)
        try:
            caller = None if self._authenticator is None else self.authenticate(request)  # off: not even a call
        except Exception as exc:  # nothing is decoded or run for a request that fails its signature
            if not isinstance(exc, errors.SQSError):
                log.exception("request %s failed unexpectedly in authentication", request_id)
            return codec.render_error(request_id, exc if isinstance(exc, errors.SQSError) else errors.InternalError())
        response = await self._run(request, request_id, codec, caller)
        # The answer is built while the disk syncs; it goes out only once what it reports is durable.
        try:
            await self._engine.durable()
        except errors.SQSError as error:
            return codec.render_error(request_id, error)
        return response

    async def _handle_sns(self, request: HttpRequest, request_id: str) -> HttpResponse:
        """An SNS request: its own door and actions (protocol/sns/), answered once durable like any other."""
        try:
            caller = None
            if self._authenticator is not None and not is_certificate_request(request.method, request.path):
                caller = self.authenticate(request)
            ctx = self._context(request, request_id, "", caller)
        except errors.SQSError as error:
            return self._sns.render_error(request_id, error)
        except Exception:
            log.exception("request %s failed unexpectedly in authentication", request_id)
            return self._sns.render_error(request_id, errors.InternalError())
        request.action, response = await self._sns.handle(request.method, request.path, request.headers,
                                                          request.query_string, request.body, ctx)
        try:
            await self._engine.durable()
        except errors.SQSError as error:
            return self._sns.render_error(request_id, error)
        return response

    def refuse(self, request: HttpRequest, error: errors.SQSError) -> HttpResponse:
        """An error answered before the request is read (its body too large, its origin refused)."""
        log.info("request refused: %s", error.message)
        return codec_for(request.headers).render_error(uuid4_string(self._random), error)

    async def _run(self, request: HttpRequest, request_id: str, codec: Codec, caller: Principal | None) -> HttpResponse:
        """Every protocol's one path: find and check the action, decode, run, render; errors in its format."""
        try:
            action, read = codec.action(request.headers, request.query_string, request.body)
            handler = ACTIONS.get(action)  # a known action on JSON needs no further check: no call then
            if handler is None or codec.limits_queue_url_actions:
                handler = _handler(request, codec, action)
            request.action = action
            params, query_credential = codec.params(read, action)
            request.params = params
            if "QueueUrl" not in params and action != "GetQueueUrl":  # GetQueueUrl names its queue by name
                self._queue_url_from_path(request, params)
            context = self._context(request, request_id, action, caller, query_credential)
            # The door: the action's whole rule, before its handler (credentials off: its resolution alone).
            if caller is not None:
                admit(self._engine, context, params)
            else:
                door = OPEN_DOORS[action]
                if door is not None:
                    door(self._engine, context, params)
            result = await handler(self._engine, context, params)
            return codec.render(request_id, action, result)
        except errors.SQSError as error:
            return codec.render_error(request_id, error)
        except Exception:
            log.exception("request %s failed unexpectedly", request_id)
            return codec.render_error(request_id, errors.InternalError())

    def _queue_url_from_path(self, request: HttpRequest, params: dict[str, Any]) -> None:
        """A request POSTed to a queue URL names that queue when its body does not (the caller checks that)."""
        if not _QUEUE_PATH.fullmatch(request.path):
            return
        host = request.headers.get("host") or request.default_host
        params["QueueUrl"] = f"{request.scheme}://{host}{unquote(request.path.rstrip('/'))}"


def _handler(request: HttpRequest, codec: Codec, action: str) -> Handler:
    """The action's handler, or the SQS error for a missing, unknown or (on a queue URL) unscoped action."""
    on_queue_url = codec.limits_queue_url_actions and _QUEUE_PATH.fullmatch(request.path) is not None
    if not action:
        if on_queue_url and request.method == "GET":
            raise errors.UnknownOperation("")
        raise errors.MissingAction(codec.missing_action)
    handler = ACTIONS.get(action)
    if handler is None or (on_queue_url and action not in _QUEUE_URL_ACTIONS):
        raise errors.InvalidAction(f"The action {action} is not valid for this endpoint.")
    return handler
