"""The SNS API on the SQS endpoint: which requests are SNS's, and running them.

A request is SNS's when its SigV4 credential scope names the service `sns` (every SDK signs so), when
its query string carries SNS's API version or is an envelope's UnsubscribeURL (unsigned GETs), or when
it fetches the envelopes' signing certificate. Everything else stays SQS's, so the SQS path pays
one substring test of the Authorization header.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import Any, Awaitable, Callable

from queueserver import errors
from queueserver.auth import Principal
from queueserver.protocol.codecs import HttpResponse
from queueserver.protocol.error_codes import wire_error
from queueserver.protocol.params import RequestContext
from queueserver.protocol.query_wire import request_fields
from queueserver.protocol.sns import envelope, publish_actions as pub, subscription_actions as sub
from queueserver.protocol.sns import topic_actions as top
from queueserver.protocol.sns import wire
from queueserver.protocol.sns.authorization import SnsAuthorization
from queueserver.storage import QueueEngine

log = logging.getLogger(__name__)

Handler = Callable[[QueueEngine, RequestContext, dict[str, Any]], Awaitable[dict[str, Any]]]
API_VERSION = "2010-03-31"
_SNS_SCOPE = "/sns/aws4_request"
_VERSION_MEMBER = f"Version={API_VERSION}"  # SNS's API version in an unsigned request's query string
_UNSUBSCRIBE_URL = "Action=Unsubscribe&"  # an envelope's UnsubscribeURL (Unsubscribe is SNS's alone)


def is_certificate_request(method: str, path: str) -> bool:
    """A GET of the envelopes' signing certificate: public, as AWS's is (no signature asked)."""
    return method == "GET" and path.startswith(envelope.CERTIFICATE_PREFIX)


def addressed_to_sns(headers: dict[str, str], path: str, query_string: str) -> bool:
    authorization = headers.get("authorization")
    if authorization is not None:
        return _SNS_SCOPE in authorization
    return (path.startswith(envelope.CERTIFICATE_PREFIX) or _VERSION_MEMBER in query_string
            or "%2Fsns%2Faws4_request" in query_string or query_string.startswith(_UNSUBSCRIBE_URL))


class SnsDispatcher:
    def __init__(self, engine: QueueEngine, credentials_on: bool) -> None:
        self._engine = engine
        self._authorization = SnsAuthorization(credentials_on)
        self._signer: envelope.Signer | None = None
        self._signer_lock = asyncio.Lock()
        may_deliver = self._authorization.may_deliver
        self.actions: dict[str, Handler] = {
            "CreateTopic": top.create_topic, "DeleteTopic": top.delete_topic, "ListTopics": top.list_topics,
            "GetTopicAttributes": top.get_topic_attributes, "SetTopicAttributes": top.set_topic_attributes,
            "TagResource": top.tag_resource, "UntagResource": top.untag_resource,
            "ListTagsForResource": top.list_tags_for_resource, "AddPermission": top.add_permission,
            "RemovePermission": top.remove_permission,
            "Subscribe": sub.subscribe, "ConfirmSubscription": sub.confirm_subscription,
            "Unsubscribe": sub.unsubscribe, "ListSubscriptions": sub.list_subscriptions,
            "ListSubscriptionsByTopic": sub.list_subscriptions_by_topic,
            "GetSubscriptionAttributes": sub.get_subscription_attributes,
            "SetSubscriptionAttributes": sub.set_subscription_attributes,
            "Publish": lambda e, c, p: pub.publish(e, c, p, self.signer, may_deliver),
            "PublishBatch": lambda e, c, p: pub.publish_batch(e, c, p, self.signer, may_deliver),
        }

    async def signer(self) -> envelope.Signer:
        """The database's envelope signer: made once, kept in the database, read once per process."""
        if self._signer is None:
            async with self._signer_lock:
                if self._signer is None:
                    now = datetime.datetime.fromtimestamp(self._engine.clock.now_ms() / 1000, datetime.timezone.utc)
                    loop = asyncio.get_running_loop()

                    async def make() -> tuple[str, str]:  # an RSA key takes a while: not on the event loop
                        return await loop.run_in_executor(None, envelope.make_signing_material, now)

                    key_pem, cert_pem = await self._engine.topics.signing_material(make)
                    self._signer = await loop.run_in_executor(None, envelope.Signer.from_pem, key_pem, cert_pem)
        return self._signer

    async def handle(self, method: str, path: str, headers: dict[str, str], query_string: str, body: bytes,
                     ctx: RequestContext) -> tuple[str, HttpResponse]:
        """(the action's name, the answer) of an SNS request."""
        action = "unknown"
        try:
            if is_certificate_request(method, path):
                action = "GetSigningCertificate"
                self._authorization.authorize(action)
                return action, await self._certificate(path)
            fields = request_fields(query_string, body, headers.get("content-type", ""))
            name = fields.get("Action", "")
            if name not in self.actions:
                raise errors.InvalidAction(f"The action {name} is not valid for this endpoint.") if name else \
                    errors.MissingAction("The request must contain the parameter Action.")
            action = name
            result = await self.run(action, ctx, wire.decode(fields))
            return action, HttpResponse(200, {"content-type": wire.CONTENT_TYPE, "x-amzn-requestid": ctx.request_id},
                                        wire.encode(action, result, ctx.request_id))
        except errors.SQSError as error:
            return action, self.render_error(ctx.request_id, error)
        except Exception:
            log.exception("request %s failed unexpectedly", ctx.request_id)
            return action, self.render_error(ctx.request_id, errors.InternalError())

    async def run(self, action: str, ctx: RequestContext, params: dict[str, Any]) -> dict[str, Any]:
        """Run `action` as `ctx.caller` through the door (before its handler): every request, and the console's
        topic pages and forms, so both are judged by the one table."""
        self._authorization.authorize(action, self._engine, ctx.caller, params)
        ctx.action = action
        return await self.actions[action](self._engine, ctx, params)

    def allows(self, action: str, caller: Principal | None, params: dict[str, Any]) -> bool:
        """Whether the door would let `caller` run `action` on what `params` name (the topics loaded): what the
        console asks before it shows a topic, a section or a form. Running it still passes `run`."""
        try:
            self._authorization.authorize(action, self._engine, caller, params)
        except errors.SQSError:
            return False
        return True

    @staticmethod
    def render_error(request_id: str, error: errors.SQSError) -> HttpResponse:
        row = wire_error(error)
        return HttpResponse(row.status, {"content-type": wire.CONTENT_TYPE, "x-amzn-requestid": request_id},
                            wire.encode_error(error, row, request_id))

    async def _certificate(self, path: str) -> HttpResponse:
        signer = await self.signer()
        if path != signer.cert_path:
            return HttpResponse(404, {"content-type": "text/plain"}, b"Not Found")
        return HttpResponse(200, {"content-type": "application/x-x509-ca-cert"}, signer.cert_pem.encode("ascii"))
