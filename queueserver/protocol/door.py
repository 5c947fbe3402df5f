"""The authorization door: every request's rule (auth/door.py's DOOR) evaluated before its handler runs.

`admit` resolves each resource the action's rule names (the QueueUrl's queue, a move task's source and
destination, a RedrivePolicy's dead-letter target …), asks the principal about every IAM action the rule
needs on each, and leaves the authorized queues on the request context for the handler (`ctx.queue`:
the QueueUrl's queue or a move task's source; `ctx.destination`). A missing queue is judged as an
existing one would be (its account's, no Policy), so a denied caller learns nothing. With credentials
off there is no principal: an action's door (`OPEN_DOORS`) only resolves what its handler uses, and
asks nothing; for an action on a QueueUrl's queue that is one call, as the hot path needs.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Callable

from queueserver import errors
from queueserver import extensions as ext
from queueserver.auth import Principal
from queueserver.auth.door import (ACCOUNT, DEAD_LETTER_TARGET, DESTINATION, NAMED_QUEUE, NEW_QUEUE,
                                   NEW_SUBSCRIPTION, QUEUE, SOURCE, SQS_RULES)
from queueserver.client_text import json_document
from queueserver.models import SUBSCRIPTION_SEPARATOR, Queue, parse_arn
from queueserver.protocol import params
from queueserver.protocol.params import RequestContext
from queueserver.protocol.redrive_actions import move_rate, tasks_listed
from queueserver.storage import QueueEngine

Resolver = Callable[[QueueEngine, RequestContext, dict[str, Any], "Principal | None", tuple[str, ...]], None]


def governing_policy(engine: QueueEngine, queue: Queue | None, region: str, account: str, name: str) -> str | None:
    """The Policy that governs the queue named so (`queue`: that queue, None if there is none): its own, or for a
    subscription its queue's, so that what the queue's Policy says holds for the subscription too."""
    if SUBSCRIPTION_SEPARATOR in name:
        parent = name.partition(SUBSCRIPTION_SEPARATOR)[0]
        queue = engine.find_queue_by_arn(f"arn:aws:sqs:{region}:{account}:{parent}")
    return queue.attributes.get("Policy") if queue is not None else None


def _ask(principal: Principal, ctx: RequestContext, actions: tuple[str, ...], arn: str, owner: str | None,
         policy: str | None) -> None:
    for iam_action in actions:
        principal.authorize(ctx.action, iam_action, arn, owner, policy)


# -- the resolvers: one per kind of resource a rule names ------------------------------------------

_URL_MEMBER = {ext.DELETE_SUBSCRIPTION_ACTION: "SubscriptionUrl"}


def _open_queue(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any], member: str = "QueueUrl") -> None:
    """Credentials off: the queue the QueueUrl names, in one account; the request then acts in its region."""
    url = p.get(member)
    if url.__class__ is not str or not url:
        url = params.string(p, member, required_=True) or ""  # raises the parameter's error
    region, owner, name = params.queue_location(url, ctx)
    ctx.region = region
    if owner != ctx.account:  # one account when credentials are off: another's URL names no queue
        raise errors.QueueDoesNotExist()
    ctx.queue = engine.get_queue(region, owner, name)


def _queue(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any], principal: Principal | None,
           actions: tuple[str, ...]) -> None:
    """The queue the QueueUrl names; the request then acts in that queue's region (URLs, ARNs, policies)."""
    member = _URL_MEMBER.get(ctx.action, "QueueUrl")
    if principal is None:
        _open_queue(engine, ctx, p, member)
        return
    url = p.get(member)
    if url.__class__ is not str or not url:
        url = params.string(p, member, required_=True) or ""
    region, owner, name = params.queue_location(url, ctx)
    if region != principal.region:
        principal.act_in(region)
    ctx.region = region
    ctx.queue = _authorized(engine, ctx, principal, actions, owner, name)


def _authorized(engine: QueueEngine, ctx: RequestContext, principal: Principal, actions: tuple[str, ...],
                owner: str, name: str) -> Queue:
    """The queue, once every action is allowed on it; a missing one is judged as its account's, no Policy."""
    try:
        queue: Queue | None = engine.get_queue(ctx.region, owner, name)
    except errors.QueueDoesNotExist:
        queue = None
    arn = f"arn:aws:sqs:{ctx.region}:{owner}:{name}"
    policy = governing_policy(engine, queue, ctx.region, owner, name)
    for iam_action in actions:
        principal.authorize(ctx.action, iam_action, arn, owner, policy)
    if queue is None:
        raise errors.QueueDoesNotExist()
    return queue


def _named_queue(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any], principal: Principal | None,
                 actions: tuple[str, ...]) -> None:
    """GetQueueUrl's queue: QueueName, in QueueOwnerAWSAccountId's account (the caller's by default)."""
    name = params.string(p, "QueueName", required_=True)
    owner = params.string(p, "QueueOwnerAWSAccountId")
    assert name is not None
    if principal is None:
        if owner is not None and owner != ctx.account:
            raise errors.QueueDoesNotExist()
        ctx.queue = engine.get_queue(ctx.region, ctx.account, name)
        return
    ctx.queue = _authorized(engine, ctx, principal, actions, owner or ctx.account, name)


def _new_queue(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any], principal: Principal | None,
               actions: tuple[str, ...]) -> None:
    name = params.string(p, "QueueName", required_=True)
    if principal is not None:
        if ctx.region != principal.region:  # a console session creating in another region
            principal.act_in(ctx.region)
        _ask(principal, ctx, actions, f"arn:aws:sqs:{ctx.region}:{ctx.account}:{name}", ctx.account, None)


def _account(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any], principal: Principal | None,
             actions: tuple[str, ...]) -> None:
    if principal is not None:
        _ask(principal, ctx, actions, "*", None, None)


def source_arn_of(handle: str) -> str:
    """The source queue ARN a task handle names (base64 of JSON with taskId and sourceArn)."""
    try:
        named = json_document(base64.b64decode(handle, validate=True))
    except (binascii.Error, ValueError):  # ValueError: not ASCII, so not base64
        named = None
    if not isinstance(named, dict) or not isinstance(named.get("taskId"), str) \
            or not isinstance(named.get("sourceArn"), str):
        raise errors.InvalidParameterValue("Value for parameter TaskHandle is invalid.")
    return str(named["sourceArn"])


def _queue_by_arn(engine: QueueEngine, ctx: RequestContext, principal: Principal | None, actions: tuple[str, ...],
                  arn: str, parameter: str) -> Queue:
    """A move task's queue, named by ARN: it must be in the request's account and region."""
    queue = engine.find_queue_by_arn(arn)
    if queue is None or queue.account != ctx.account or queue.region != ctx.region:
        if principal is not None:
            _ask(principal, ctx, actions, arn, arn.split(":")[4] if arn.count(":") >= 5 else None, None)
        raise errors.ResourceNotFound(f"The resource that you specified for the {parameter} parameter doesn't exist.")
    if principal is not None:
        principal.act_in(queue.region)
        _ask(principal, ctx, actions, queue.arn, queue.account, governing_policy(engine, queue, *queue.key))
    return queue


def _source(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any], principal: Principal | None,
            actions: tuple[str, ...]) -> None:
    if ctx.action == "CancelMessageMoveTask":
        handle = params.string(p, "TaskHandle", required_=True)
        assert handle is not None
        arn = source_arn_of(handle)
    else:
        arn = params.string(p, "SourceArn", required_=True) or ""
        if ctx.action == "StartMessageMoveTask":  # its members are checked before its queues are looked up
            params.string(p, "DestinationArn")
            move_rate(p)
        else:
            tasks_listed(p)
    ctx.queue = _queue_by_arn(engine, ctx, principal, actions, arn, "SourceArn")  # the queue a task acts on


def _destination(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any], principal: Principal | None,
                 actions: tuple[str, ...]) -> None:
    """DestinationArn's queue; without one, every queue the source's messages return to: those whose
    RedrivePolicy names it now, and (asked while the task starts) those its messages came from."""
    arn = params.string(p, "DestinationArn")
    if arn:
        ctx.destination = _queue_by_arn(engine, ctx, principal, actions, arn, "DestinationArn")
        return
    if principal is None or ctx.queue is None:
        return
    for queue in engine.dead_letter_sources(ctx.queue)[0]:
        _may_send_back(engine, ctx, principal, actions, queue.arn)

    def return_check(origins: list[str]) -> None:
        for origin in origins:
            _may_send_back(engine, ctx, principal, actions, origin)

    ctx.return_check = return_check


def _may_send_back(engine: QueueEngine, ctx: RequestContext, principal: Principal, actions: tuple[str, ...],
                   arn: str) -> None:
    named = parse_arn(arn)
    if named is None:  # the task fails on such a message: there is nowhere to send it
        return
    _ask(principal, ctx, actions, arn, named[1], governing_policy(engine, engine.find_queue_by_arn(arn), *named))


def _dead_letter_target(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any], principal: Principal | None,
                        actions: tuple[str, ...]) -> None:
    """The queue a RedrivePolicy would move messages to: the one a request sets, or (a receive) the queue's."""
    if principal is None:
        return
    arn = None
    if ctx.action == "ReceiveMessage":
        redrive = ctx.queue.redrive_policy if ctx.queue is not None else None
        arn = redrive[0] if redrive is not None else None
    else:
        attributes = p.get("Attributes")
        text = attributes.get("RedrivePolicy") if isinstance(attributes, dict) else None
        document = json_document(text) if isinstance(text, str) and text else None
        target = document.get("deadLetterTargetArn") if isinstance(document, dict) else None
        arn = target if isinstance(target, str) else None  # anything else: the handler refuses the policy
    named = parse_arn(arn) if arn else None
    if arn is not None and named is not None:
        _ask(principal, ctx, actions, arn, named[1],
             governing_policy(engine, engine.find_queue_by_arn(arn), *named))


def _new_subscription(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any], principal: Principal | None,
                      actions: tuple[str, ...]) -> None:
    name = p.get("SubscriptionName")
    queue = ctx.queue
    if principal is None or queue is None or not isinstance(name, str) or not name:
        return  # the handler refuses a missing or bad name
    _ask(principal, ctx, actions, f"{queue.arn}{SUBSCRIPTION_SEPARATOR}{name}", queue.account,
         queue.attributes.get("Policy"))


RESOLVERS: dict[str, Resolver] = {
    QUEUE: _queue, NAMED_QUEUE: _named_queue, NEW_QUEUE: _new_queue, ACCOUNT: _account, SOURCE: _source,
    DESTINATION: _destination, DEAD_LETTER_TARGET: _dead_letter_target, NEW_SUBSCRIPTION: _new_subscription,
}
# Asked only of a principal: with credentials off a handler needs nothing from these.
_ONLY_ASKED = frozenset({NEW_QUEUE, ACCOUNT, DEAD_LETTER_TARGET, NEW_SUBSCRIPTION})

# A step: the resolver of one resource, the actions always needed on it, and those a request member brings in.
Step = tuple[Resolver, tuple[str, ...], tuple[tuple[str, str, tuple[str, ...]], ...]]


def _steps(action: str, asked: bool) -> tuple[Step, ...]:
    """The rule's needs, one step per resource, in the rule's order."""
    steps: dict[str, list[Any]] = {}
    for need in SQS_RULES[action].needs:
        if not asked and need.resource in _ONLY_ASKED:
            continue
        step = steps.setdefault(need.resource, [RESOLVERS[need.resource], (), ()])
        if need.when is None:
            step[1] = step[1] + need.actions
        else:
            step[2] = step[2] + ((*need.when, need.actions),)
    return tuple((resolver, actions, extras) for resolver, actions, extras in steps.values())


ASKED_STEPS: dict[str, tuple[Step, ...]] = {action: _steps(action, asked=True) for action in SQS_RULES}
Door = Callable[[QueueEngine, RequestContext, dict[str, Any]], None]


def _open_door(action: str) -> Door | None:
    """The door of an action with credentials off: resolve what its handler uses, ask nothing. An action on
    the queue a QueueUrl names gets `_open_queue` itself: the hot path's one call."""
    steps = _steps(action, asked=False)
    if not steps:
        return None
    if len(steps) == 1 and steps[0][0] is _queue:
        member = _URL_MEMBER.get(action)
        if member is None:
            return _open_queue
        return lambda engine, ctx, p: _open_queue(engine, ctx, p, member)

    def resolve(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> None:
        for resolver, actions, _ in steps:
            resolver(engine, ctx, p, None, actions)

    return resolve


OPEN_DOORS: dict[str, Door | None] = {action: _open_door(action) for action in SQS_RULES}


def admit(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> None:
    """Resolve and authorize everything `ctx.action`'s rule names, or raise the error that refuses it."""
    principal = ctx.caller
    if principal is None:
        door = OPEN_DOORS[ctx.action]
        if door is not None:
            door(engine, ctx, p)
        return
    for resolver, actions, extras in ASKED_STEPS[ctx.action]:
        for member, value, more in extras:
            if p.get(member) == value:
                actions = actions + more
        resolver(engine, ctx, p, principal, actions)


# The resources that are the queue an action is shown on (the console asks of one queue at a time).
_OF_THE_QUEUE = frozenset({QUEUE, NAMED_QUEUE, NEW_QUEUE, ACCOUNT, SOURCE})


def permits(engine: QueueEngine, principal: Principal, action: str, arn: str) -> bool:
    """Whether `action`'s rule lets the principal act on the queue `arn` names (or "*"), as far as that queue
    decides it: what the console asks before it shows a button or a section. Running it still passes `admit`."""
    named = parse_arn(arn)  # None for "*": an action on no queue
    owner = named[1] if named is not None else None  # a missing queue is its account's, as on the API
    policy = governing_policy(engine, engine.find_queue_by_arn(arn), *named) if named else None
    if named is not None:
        principal.act_in(named[0])
    for need in SQS_RULES[action].needs:
        if need.resource in _OF_THE_QUEUE and need.when is None:
            for iam_action in need.actions:
                if not principal.may(action, iam_action, arn, owner, policy):
                    return False
    return True
