"""Handlers of the queue actions: create, find, list, delete, attributes, tags, permissions."""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from queueserver import errors, limits
from queueserver.client_text import json_document
from queueserver.models import SUBSCRIPTION_SEPARATOR, Queue
from queueserver.protocol import params, queue_attributes, redrive_policy
from queueserver.protocol.messages import first_invalid_character
from queueserver.protocol.params import RequestContext
from queueserver.storage import QueueEngine

_STANDARD_NAME = re.compile(rf"[A-Za-z0-9_-]{{1,{limits.MAX_QUEUE_NAME_LENGTH}}}")  # fullmatch: no "$", which lets "\n" by
_FIFO_NAME = re.compile(rf"[A-Za-z0-9_-]{{1,{limits.MAX_QUEUE_NAME_LENGTH - len('.fifo')}}}\.fifo")
_REGION_NAME = re.compile(limits.REGION_NAME)  # fullmatch
_ACCOUNT_ID = re.compile(r"[0-9]{12}")
_SUBSCRIPTION_POLICY = "A subscription has no Policy of its own: its queue's Policy covers it."
_PERMISSION_ACTIONS = {
    "*", "ChangeMessageVisibility", "DeleteMessage", "GetQueueAttributes", "GetQueueUrl",
    "ListDeadLetterSourceQueues", "PurgeQueue", "ReceiveMessage", "SendMessage",
}


def valid_queue_name(name: str, fifo: bool) -> bool:
    return (_FIFO_NAME if fifo else _STANDARD_NAME).fullmatch(name) is not None


def resolve_queue(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any], *,
                  also: tuple[str, ...] = ()) -> Queue:
    """The queue the QueueUrl names; the request then acts in that queue's region (URLs, ARNs, policies).

    `also`: actions the caller must be allowed on it besides this request's (with credentials on).
    """
    url = params.string(p, "QueueUrl", required_=True)
    assert url is not None
    region, owner, name = params.queue_location(url, ctx)
    ctx.region = region
    if ctx.caller is None:
        if owner != ctx.account:  # one account when credentials are off: another's URL names no queue
            raise errors.QueueDoesNotExist()
        return engine.get_queue(region, owner, name)
    return authorized_queue(engine, ctx, owner, name, also)


def authorized_queue(engine: QueueEngine, ctx: RequestContext, owner: str, name: str,
                     also: tuple[str, ...] = ()) -> Queue:
    """The queue, once the caller is allowed this request's action (and `also`'s) on it.

    A missing queue is judged as an existing one would be, so a denied caller learns nothing.
    """
    try:
        queue: Queue | None = engine.get_queue(ctx.region, owner, name)
    except errors.QueueDoesNotExist:
        queue = None
    arn = f"arn:aws:sqs:{ctx.region}:{owner}:{name}"
    policy = governing_policy(engine, queue, ctx.region, owner, name)
    ctx.authorize(arn, owner, policy)
    for action in also:
        ctx.authorize(arn, owner, policy, action)
    if queue is None:
        raise errors.QueueDoesNotExist()
    return queue


def governing_policy(engine: QueueEngine, queue: Queue | None, region: str, account: str, name: str) -> str | None:
    """The Policy that governs the queue named so (`queue`: that queue, None if there is none): its own, or for a
    subscription its queue's, so that what the queue's Policy says holds for the subscription too."""
    if SUBSCRIPTION_SEPARATOR in name:
        parent = name.partition(SUBSCRIPTION_SEPARATOR)[0]
        queue = engine.find_queue_by_arn(f"arn:aws:sqs:{region}:{account}:{parent}")
    return queue.attributes.get("Policy") if queue is not None else None


async def create_queue(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    name = params.string(p, "QueueName", required_=True)
    assert name is not None
    requested = params.string_map(p, "Attributes")
    fifo = requested.get("FifoQueue", "false").strip().lower() == "true"
    check_queue_name(name, fifo)
    if not _REGION_NAME.fullmatch(ctx.region):  # a signature's region is checked before; this is every other door
        raise errors.InvalidParameterValue(f"{ctx.region[:64]!r} is not a region name.")
    ctx.authorize(f"arn:aws:sqs:{ctx.region}:{ctx.account}:{name}", ctx.account, None)
    supplied = _check_attributes(engine, ctx, name, fifo, requested, creating=True)
    tags = params.string_map(p, "tags")
    _check_tags(tags)
    defaults = {**queue_attributes.DEFAULTS, **(queue_attributes.FIFO_DEFAULTS if fifo else {})}
    attributes = queue_attributes.apply(defaults, supplied)
    queue = await engine.create_queue(ctx.region, ctx.account, name, fifo=fifo, attributes=attributes,
                                     supplied=supplied, tags=tags)
    return {"QueueUrl": ctx.queue_url(queue.name)}


def check_queue_name(name: str, fifo: bool) -> None:
    if fifo and not _FIFO_NAME.fullmatch(name):
        raise errors.InvalidParameterValue(
            "The name of a FIFO queue can only include alphanumeric characters, hyphens, or underscores, "
            "must end with .fifo suffix and be 1 to 80 in length."
        )
    if not fifo and not _STANDARD_NAME.fullmatch(name):
        raise errors.InvalidParameterValue(
            "Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length"
        )


def _check_attributes(engine: QueueEngine, ctx: RequestContext, name: str, fifo: bool,
                      requested: dict[str, str], *, creating: bool) -> dict[str, str]:
    checked = queue_attributes.check(requested, fifo=fifo, creating=creating)
    if "RedrivePolicy" in checked:
        checked["RedrivePolicy"] = redrive_policy.check_redrive_policy(
            engine, ctx, name, fifo, checked["RedrivePolicy"])
    if "RedriveAllowPolicy" in checked:
        checked["RedriveAllowPolicy"] = redrive_policy.check_redrive_allow_policy(checked["RedriveAllowPolicy"])
    return checked


async def get_queue_url(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    name = params.string(p, "QueueName", required_=True)
    owner = params.string(p, "QueueOwnerAWSAccountId")
    assert name is not None
    if ctx.caller is not None:  # another account's queue, where its policy allows GetQueueUrl
        queue = authorized_queue(engine, ctx, owner or ctx.account, name)
        return {"QueueUrl": ctx.queue_url(queue.name, queue.account)}
    if owner is not None and owner != ctx.account:
        raise errors.QueueDoesNotExist()
    queue = engine.get_queue(ctx.region, ctx.account, name)
    return {"QueueUrl": ctx.queue_url(queue.name)}


async def list_queues(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    prefix = params.string(p, "QueueNamePrefix") or ""
    max_results = params.integer(p, "MaxResults", None, 1, limits.MAX_LIST_RESULTS,
                                 "MaxResults must be an integer between 1 and 1000.")
    ctx.authorize("*", None, None)
    token = params.string(p, "NextToken")
    limit = max_results if max_results is not None else limits.MAX_LIST_RESULTS
    # One more than the page: whether another page follows, without listing the rest.
    queues = engine.list_queues(ctx.region, ctx.account, prefix=prefix, after=_decode_token(token) if token else "",
                                limit=limit + 1)
    result: dict[str, Any] = {}
    if queues:
        result["QueueUrls"] = [ctx.queue_url(q.name) for q in queues[:limit]]
    if max_results is not None and len(queues) > limit:
        result["NextToken"] = _encode_token(queues[limit - 1].name)
    return result


def paginate(urls: list[str], names: list[str], max_results: int | None, token: str | None,
             key: str) -> dict[str, Any]:
    """One page of a name-sorted listing; NextToken is only given when MaxResults was."""
    start = 0
    if token:
        after = _decode_token(token)
        start = next((i for i, name in enumerate(names) if name > after), len(names))
    limit = max_results if max_results is not None else limits.MAX_LIST_RESULTS
    page = urls[start:start + limit]
    result: dict[str, Any] = {}
    if page or key == "queueUrls":
        result[key] = page
    if max_results is not None and start + limit < len(urls):
        result["NextToken"] = _encode_token(names[start + limit - 1])
    return result


def _encode_token(name: str) -> str:
    return base64.urlsafe_b64encode(name.encode()).decode()


def _decode_token(token: str) -> str:
    try:
        return base64.urlsafe_b64decode(token.encode()).decode()
    except (binascii.Error, UnicodeError, ValueError):
        raise errors.InvalidParameterValue("Invalid NextToken value.") from None


async def delete_queue(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    await engine.delete_queue(resolve_queue(engine, ctx, p))
    return {}


async def get_queue_attributes(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    queue = resolve_queue(engine, ctx, p)
    names = params.string_list(p, "AttributeNames")
    for name in names:
        if name != "All" and name not in queue_attributes.READABLE:
            raise queue_attributes.unknown(name)
    wanted = set(queue_attributes.READABLE) if "All" in names else set(names)
    if not wanted:
        return {}
    values: dict[str, str] = {k: v for k, v in queue.attributes.items() if k in wanted}
    if wanted & {"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
                 "ApproximateNumberOfMessagesDelayed"}:
        counts = await engine.queue_counts(queue)
        values["ApproximateNumberOfMessages"] = str(counts.visible)
        values["ApproximateNumberOfMessagesNotVisible"] = str(counts.in_flight)
        values["ApproximateNumberOfMessagesDelayed"] = str(counts.delayed)
    values["CreatedTimestamp"] = str(queue.created_at_ms // 1000)
    values["LastModifiedTimestamp"] = str(queue.modified_at_ms // 1000)
    values["QueueArn"] = queue.arn
    result = {k: v for k, v in values.items() if k in wanted}
    return {"Attributes": result} if result else {}


async def set_queue_attributes(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    queue = resolve_queue(engine, ctx, p)
    requested = params.string_map(p, "Attributes")
    if not requested:
        raise errors.MissingParameter("The request must contain the parameter Attributes.")
    if "Policy" in requested and queue.subscribed_to is not None:
        raise errors.InvalidAttributeValue(_SUBSCRIPTION_POLICY)
    changes = _check_attributes(engine, ctx, queue.name, queue.fifo, requested, creating=False)
    await engine.update_queue(queue, lambda attributes, tags: (queue_attributes.apply(attributes, changes), tags))
    return {}


async def purge_queue(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    await engine.purge_queue(resolve_queue(engine, ctx, p))
    return {}


def _check_tags(tags: dict[str, str]) -> None:
    if len(tags) > limits.MAX_TAGS:
        raise errors.InvalidParameterValue(f"Too many tags added for queue. The maximum is {limits.MAX_TAGS}.")
    for key, value in tags.items():
        if not 1 <= len(key) <= limits.MAX_TAG_KEY_LENGTH:
            raise errors.InvalidParameterValue("Tag keys must be between 1 and 128 characters in length.")
        if key.lower().startswith("aws:"):
            raise errors.InvalidParameterValue("Tag keys must not start with the reserved prefix aws:.")
        if len(value) > limits.MAX_TAG_VALUE_LENGTH:
            raise errors.InvalidParameterValue("Tag values must be less than 256 characters in length.")
        if first_invalid_character(key) is not None or first_invalid_character(value) is not None:
            raise errors.InvalidParameterValue("Tag keys and values may contain only XML 1.0 characters.")


async def tag_queue(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    queue = resolve_queue(engine, ctx, p)
    tags = params.string_map(p, "Tags")
    if not tags:
        raise errors.MissingParameter("The request must contain the parameter Tags.")
    _check_tags(tags)

    def change(attributes: dict[str, str], current: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
        merged = {**current, **tags}
        if len(merged) > limits.MAX_TAGS:
            raise errors.InvalidParameterValue(
                f"Too many tags added for queue {queue.name}. A queue can have at most {limits.MAX_TAGS} tags.")
        return attributes, merged

    await engine.update_queue(queue, change)
    return {}


async def untag_queue(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    queue = resolve_queue(engine, ctx, p)
    keys = params.string_list(p, "TagKeys")
    if not keys:
        raise errors.MissingParameter("The request must contain the parameter TagKeys.")
    await engine.update_queue(queue, lambda attributes, tags: (
        attributes, {k: v for k, v in tags.items() if k not in keys}))
    return {}


async def list_queue_tags(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    tags = resolve_queue(engine, ctx, p).tags
    return {"Tags": dict(tags)} if tags else {}  # AWS leaves the member out when there are none


def _policy_holder(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> Queue:
    """The queue of AddPermission or RemovePermission: a subscription has no Policy of its own."""
    queue = resolve_queue(engine, ctx, p)
    if queue.subscribed_to is not None:
        raise errors.invalid_value("QueueUrl", p["QueueUrl"], _SUBSCRIPTION_POLICY)
    return queue


async def add_permission(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    queue = _policy_holder(engine, ctx, p)
    label = params.string(p, "Label", required_=True)
    accounts = params.string_list(p, "AWSAccountIds")
    actions = params.string_list(p, "Actions")
    if not accounts:
        raise errors.MissingParameter("The request must contain the parameter AWSAccountIds.")
    if not actions:
        raise errors.MissingParameter("The request must contain the parameter Actions.")
    if not _STANDARD_NAME.fullmatch(label):
        raise errors.invalid_value("Label", label, "Can only include alphanumeric characters, hyphens, or "
                                                   "underscores. 1 to 80 in length.")
    for account in accounts:
        if not _ACCOUNT_ID.fullmatch(account):
            raise errors.invalid_value("PrincipalId", f"[{account}]", "Unable to verify.")
    if len(actions) > limits.MAX_POLICY_ACTIONS:
        raise errors.OverLimit(f"{len(actions)} Actions were found, maximum allowed is {limits.MAX_POLICY_ACTIONS}.")
    for action in actions:
        if action not in _PERMISSION_ACTIONS:
            raise errors.invalid_value("ActionName", f"SQS:{action}",
                                       "Only the queue owner is allowed to invoke this action.")
    statement = {
        "Sid": label,
        "Effect": "Allow",
        "Principal": {"AWS": _one_or_list([f"arn:aws:iam::{a}:root" for a in accounts])},
        "Action": _one_or_list([f"SQS:{a}" for a in actions]),
        "Resource": queue.arn,
    }

    def change(attributes: dict[str, str], tags: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
        policy = _policy(attributes, queue)
        if any(s.get("Sid") == label for s in policy["Statement"]):
            raise errors.invalid_value("Label", label, "Already exists.")
        policy["Statement"].append(statement)
        text = json.dumps(policy, separators=(",", ":"))
        if len(text.encode()) > limits.MAX_POLICY_BYTES:
            raise errors.OverLimit(f"The queue's policy would be longer than {limits.MAX_POLICY_BYTES} bytes.")
        return {**attributes, "Policy": text}, tags

    await engine.update_queue(queue, change)
    return {}


async def remove_permission(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    queue = _policy_holder(engine, ctx, p)
    label = params.string(p, "Label", required_=True)

    def change(attributes: dict[str, str], tags: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
        policy = _policy(attributes, queue)
        kept = [s for s in policy["Statement"] if s.get("Sid") != label]
        if len(kept) == len(policy["Statement"]):
            raise errors.invalid_value("Label", label, "can't find label.")
        updated = dict(attributes)
        if kept:
            updated["Policy"] = json.dumps({**policy, "Statement": kept}, separators=(",", ":"))
        else:
            updated.pop("Policy", None)
        return updated, tags

    await engine.update_queue(queue, change)
    return {}


def _policy(attributes: dict[str, str], queue: Queue) -> dict[str, Any]:
    if "Policy" in attributes:
        policy = json_document(attributes["Policy"])
        statements = queue_attributes.policy_statements(policy)
        if statements is None:  # stored before SetQueueAttributes checked its statements
            raise errors.InvalidAttributeValue(
                "Invalid value for the parameter Policy. Reason: the queue's policy has no Statement list to "
                "change; set a valid one with SetQueueAttributes first.")
        return {**policy, "Statement": statements}
    return {"Version": "2008-10-17", "Id": f"{queue.arn}/SQSDefaultPolicy", "Statement": []}


def _one_or_list(values: list[str]) -> str | list[str]:
    return values[0] if len(values) == 1 else values
