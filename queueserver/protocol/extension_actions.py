"""queueserver's extensions to the SQS API, named so that no one mistakes them for SQS's.

`QueueserverBrowseMessages` lists a queue's messages in send order without receiving
them: no receipt handle is issued, no receive count moves, nothing becomes invisible.
So a dead-letter queue can be read for analysis as often as needed. Over JSON it is
`X-Amz-Target: AmazonSQS.QueueserverBrowseMessages`; over Query, `Action=QueueserverBrowseMessages`.

Every way to a message's body is one rule: browsing, and a subscription that copies the messages a
queue holds (`StartFrom=all`), also need `sqs:ReceiveMessage` on the queue, so a Deny of it holds.
"""

from __future__ import annotations

from typing import Any

from queueserver import errors
from queueserver.client_text import whole_number
from queueserver.extensions import MAX_BROWSE
from queueserver.models import SUBSCRIPTION_SEPARATOR, BrowsedMessage, Queue
from queueserver.protocol import messages, params
from queueserver.protocol.params import RequestContext
from queueserver.protocol.queue_actions import valid_queue_name
from queueserver.storage import QueueEngine

DEFAULT_BROWSE = 100


async def browse_messages(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    queue = ctx.target
    limit = params.integer(p, "MaxNumberOfMessages", DEFAULT_BROWSE, 1, MAX_BROWSE,
                           f"Must be between 1 and {MAX_BROWSE}, if provided.")
    token = params.string(p, "NextToken")
    after: int | None = 0
    if token:
        after = whole_number(token)  # a row id: the position of the last message of the page before
        if after is None:
            raise errors.InvalidParameterValue("Invalid NextToken value.")
    attribute_names = params.string_list(p, "MessageAttributeNames") if "MessageAttributeNames" in p else ["All"]
    assert limit is not None
    browsed = await engine.browse_messages(queue, after=after, limit=limit)
    result: dict[str, Any] = {"Messages": [_message(m, attribute_names) for m in browsed]}
    if len(browsed) == limit:
        result["NextToken"] = str(browsed[-1].position)
    return result


def _message(m: BrowsedMessage, attribute_names: list[str]) -> dict[str, Any]:
    result: dict[str, Any] = {
        "MessageId": m.message_id, "MD5OfBody": m.md5_of_body, "Body": m.body, "State": m.state,
        "Attributes": messages.system_attributes(m),
    }
    messages.add_message_attributes(result, m, attribute_names)
    return result


# -- subscriptions --------------------------------------------------------------------

_START_FROM = ("new", "all")


async def create_subscription(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    """A named receiver of every message sent to the queue from now on (StartFrom=all: also those it holds).

    It lives in the queue's account, whoever asks (another account needs a Policy naming the action).
    """
    start_from = params.string(p, "StartFrom") or "new"
    queue = _subscribable_queue(ctx, p)
    name = params.string(p, "SubscriptionName", required_=True)
    assert name is not None
    if not valid_queue_name(name, queue.fifo):
        raise errors.InvalidParameterValue(
            "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length"
            + (", and must end with .fifo on a FIFO queue." if queue.fifo else "."))
    if start_from not in _START_FROM:
        raise errors.invalid_value("StartFrom", start_from, "Must be new or all, if provided.")
    subscription = await engine.create_subscription(queue, name, start_from_all=start_from == "all")
    return {"SubscriptionUrl": ctx.queue_url(subscription.name, subscription.account)}


async def delete_subscription(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    subscription = ctx.target  # the door resolved SubscriptionUrl
    if subscription.subscribed_to is None:
        raise errors.invalid_value("SubscriptionUrl", p["SubscriptionUrl"], "This is a queue, not a subscription.")
    await engine.delete_queue(subscription)
    return {}


async def list_subscriptions(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    queue = _subscribable_queue(ctx, p)
    prefix = len(queue.name) + len(SUBSCRIPTION_SEPARATOR)
    return {"Subscriptions": [{"SubscriptionName": s.name[prefix:],
                               "SubscriptionUrl": ctx.queue_url(s.name, s.account)}
                              for s in engine.list_subscriptions(queue)]}


def _subscribable_queue(ctx: RequestContext, p: dict[str, Any]) -> Queue:
    queue = ctx.target
    if queue.subscribed_to is not None:
        raise errors.invalid_value("QueueUrl", p["QueueUrl"], "A subscription has no subscriptions of its own.")
    return queue
