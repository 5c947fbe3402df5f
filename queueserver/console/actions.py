"""The console's state changes: one per form, each run as the viewer through the SQS action handlers.

Every form posts to the page of the queue (or subscription) it acts on, so the queue's region,
account and name come from the path. Before an action runs, the viewer's permission is checked
the way the API checks it (the same action name, the queue's ARN and Policy), so a forged form
is refused as the missing button suggested; the handler then authorizes it again as it would any request.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from queueserver import errors
from queueserver.client_text import whole_number
from queueserver.console.access import Viewer
from queueserver.console.calls import SqsCalls
from queueserver.extensions import CREATE_SUBSCRIPTION_ACTION, DELETE_SUBSCRIPTION_ACTION
from queueserver.models import SUBSCRIPTION_SEPARATOR

# console action -> (SQS action on a queue, SQS action on a subscription); None: not on that kind
FORM_ACTIONS: dict[str, tuple[str | None, str | None]] = {
    "send": ("SendMessage", None),  # a subscription receives what is sent to its queue
    "purge": ("PurgeQueue", "PurgeQueue"),  # on a subscription: that subscription only
    "delete": ("DeleteQueue", DELETE_SUBSCRIPTION_ACTION),
    "redrive": ("StartMessageMoveTask", "StartMessageMoveTask"),
    "cancel": ("CancelMessageMoveTask", "CancelMessageMoveTask"),
    "subscribe": (CREATE_SUBSCRIPTION_ACTION, None),
}


@dataclass(frozen=True)
class Target:
    """The queue or subscription a form acts on, as its page's path names it."""

    region: str
    account: str
    name: str

    @property
    def arn(self) -> str:
        return f"arn:aws:sqs:{self.region}:{self.account}:{self.name}"

    @property
    def parent(self) -> str | None:
        """The queue of a subscription; None for a queue."""
        parent, separator, _ = self.name.partition(SUBSCRIPTION_SEPARATOR)
        return parent if separator else None

    @property
    def shown_name(self) -> str:
        """What a confirmation asks to type: a subscription's own name, or the queue's."""
        return self.name.partition(SUBSCRIPTION_SEPARATOR)[2] or self.name


@dataclass(frozen=True)
class Done:
    """What to tell the viewer, and where: the target's page, unless `then` names another (or the overview)."""

    notice: str
    then: Target | None = None
    to_overview: bool = False


def sqs_action(action: str, target: Target) -> str:
    """The SQS action a console form runs on this target (ConsoleRefused when there is none)."""
    pair = FORM_ACTIONS.get(action)
    chosen = None if pair is None else pair[1] if target.parent is not None else pair[0]
    if chosen is None:
        raise errors.ConsoleRefused(404, "No such console action here.")
    return chosen


async def run(calls: SqsCalls, viewer: Viewer, action: str, target: Target, fields: dict[str, str]) -> Done:
    """Run a form's action on `target` as `viewer`; ConsoleError carries SQS's refusal."""
    chosen = sqs_action(action, target)
    if not viewer.may(chosen, target.arn):
        raise errors.ConsoleRefused(403, f"You may not {chosen} on this queue.")
    if action in ("purge", "delete") and fields.get("confirm", "") != target.shown_name:
        raise errors.ConsoleNotConfirmed(f"Type the {'subscription' if target.parent else 'queue'} name ({target.shown_name}) "
                         "to confirm.")
    url = calls.queue_url(target.region, target.name, target.account)
    caller = viewer.caller
    if action == "send":
        params: dict[str, Any] = {"QueueUrl": url, "MessageBody": fields.get("body", "")}
        for field in ("MessageGroupId", "MessageDeduplicationId"):
            if fields.get(field):
                params[field] = fields[field]
        sent = await calls.call("SendMessage", target.region, params, caller)
        return Done(f"Message {sent['MessageId']} sent.")
    if action == "purge":
        await calls.call("PurgeQueue", target.region, {"QueueUrl": url}, caller)
        return Done("Subscription purged." if target.parent else "Queue purged.")
    if action == "delete" and target.parent is not None:
        await calls.call(chosen, target.region, {"SubscriptionUrl": url}, caller)
        queue = Target(target.region, target.account, target.parent)
        return Done(f"Subscription {target.shown_name} deleted.", then=queue)
    if action == "delete":
        await calls.call("DeleteQueue", target.region, {"QueueUrl": url}, caller)
        return Done(f"Queue {target.name} deleted.", to_overview=True)
    if action == "subscribe":
        name = fields.get("subscription", "")
        await calls.call(chosen, target.region, {"QueueUrl": url, "SubscriptionName": name,
                                                 "StartFrom": fields.get("start_from") or "new"}, caller)
        return Done(f"Subscription {name} created.")
    if action == "redrive":
        move: dict[str, Any] = {"SourceArn": target.arn}
        if fields.get("rate"):  # SQS validates it (1-500)
            rate = whole_number(fields["rate"])
            move["MaxNumberOfMessagesPerSecond"] = -1 if rate is None else rate
        started = await calls.call("StartMessageMoveTask", target.region, move, caller)
        return Done(f"Redrive started (task {started['TaskHandle'][:12]}…).")
    await calls.call("CancelMessageMoveTask", target.region, {"TaskHandle": fields.get("task_handle", "")}, caller)
    return Done("Redrive cancelled.")


async def create_queue(calls: SqsCalls, viewer: Viewer, fields: dict[str, str], home_region: str) -> Target:
    """The overview's form: a queue in the viewer's own account (CreateQueue is never cross-account)."""
    region, name = fields.get("region", home_region), fields.get("name", "")
    target = Target(region, viewer.account, name)
    if not viewer.may("CreateQueue", target.arn):
        raise errors.ConsoleRefused(403, "You may not CreateQueue on this queue.")
    attributes: dict[str, str] = {}
    if fields.get("fifo"):
        attributes["FifoQueue"] = "true"
    if fields.get("dead_letter_queue"):
        attributes["RedrivePolicy"] = json.dumps({
            "deadLetterTargetArn": f"arn:aws:sqs:{region}:{viewer.account}:{fields['dead_letter_queue']}",
            "maxReceiveCount": fields.get("max_receive_count") or "5"})
    await calls.call("CreateQueue", region, {"QueueName": name, "Attributes": attributes}, viewer.caller)
    return target
