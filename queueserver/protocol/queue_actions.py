"""Handlers of the queue actions: create, find, list, delete, attributes, tags, permissions."""

from __future__ import annotations

import base64
import binascii
import json
import re
from typing import Any

from queueserver import errors, limits
from queueserver.client_text import json_document
from queueserver.models import Queue
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


async def create_queue(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    name = params.string(p, "QueueName", required_=True)
    assert name is not None
    requested = params.string_map(p, "Attributes")
    fifo = requested.get("FifoQueue", "false").strip().lower() == "true"
    check_queue_name(name, fifo)
    if not _REGION_NAME.fullmatch(ctx.region):  # a signature's region is checked before; this is every other door
        raise errors.InvalidParameterValue(f"{ctx.region[:64]!r} is not a region name.")
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
    queue = ctx.target  # another account's, where its Policy allows GetQueueUrl (with credentials on)
    return {"QueueUrl": ctx.queue_url(queue.name, queue.account)}


async def list_queues(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    prefix = params.string(p, "QueueNamePrefix") or ""
    max_results = params.integer(p, "MaxResults", None, 1, limits.MAX_LIST_RESULTS,
                                 "MaxResults must be an integer between 1 and 1000.")
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
    await engine.delete_queue(ctx.target)
    return {}


async def get_queue_attributes(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    queue = ctx.target
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
    queue = ctx.target
    requested = params.string_map(p, "Attributes")
    if not requested:
        raise errors.MissingParameter("The request must contain the parameter Attributes.")
    if "Policy" in requested and queue.subscribed_to is not None:
        raise errors.InvalidAttributeValue(_SUBSCRIPTION_POLICY)
    changes = _check_attributes(engine, ctx, queue.name, queue.fifo, requested, creating=False)
    await engine.update_queue(queue, lambda attributes, tags: (queue_attributes.apply(attributes, changes), tags))
    return {}


async def purge_queue(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    await engine.purge_queue(ctx.target)
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
    queue = ctx.target
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
    queue = ctx.target
    keys = params.string_list(p, "TagKeys")
    if not keys:
        raise errors.MissingParameter("The request must contain the parameter TagKeys.")
    await engine.update_queue(queue, lambda attributes, tags: (
        attributes, {k: v for k, v in tags.items() if k not in keys}))
    return {}


async def list_queue_tags(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    tags = ctx.target.tags
    return {"Tags": dict(tags)} if tags else {}  # AWS leaves the member out when there are none


def _policy_holder(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> Queue:
    """The queue of AddPermission or RemovePermission: a subscription has no Policy of its own."""
    queue = ctx.target
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
