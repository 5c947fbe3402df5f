"""The topic actions: create, delete, list, attributes, tags and permissions (AWS's defaults and texts)."""

from __future__ import annotations

import json
from typing import Any

from queueserver import errors
from queueserver.models import Topic
from queueserver.protocol.params import RequestContext
from queueserver.protocol.sns import filter_policy
from queueserver.protocol.sns.names import check_topic_name, find_topic, invalid, page, text, topic_of
from queueserver.storage import QueueEngine

# Settable on a topic (CreateTopic and SetTopicAttributes); FifoTopic only at creation.
SETTABLE = frozenset({
    "DisplayName", "Policy", "DeliveryPolicy", "ContentBasedDeduplication", "SignatureVersion", "TracingConfig",
    "KmsMasterKeyId", "FifoThroughputScope", "DataProtectionPolicy", "ArchivePolicy",
    "SQSSuccessFeedbackRoleArn", "SQSSuccessFeedbackSampleRate", "SQSFailureFeedbackRoleArn",
    "HTTPSuccessFeedbackRoleArn", "HTTPSuccessFeedbackSampleRate", "HTTPFailureFeedbackRoleArn",
    "LambdaSuccessFeedbackRoleArn", "LambdaSuccessFeedbackSampleRate", "LambdaFailureFeedbackRoleArn",
    "FirehoseSuccessFeedbackRoleArn", "FirehoseSuccessFeedbackSampleRate", "FirehoseFailureFeedbackRoleArn",
    "ApplicationSuccessFeedbackRoleArn", "ApplicationSuccessFeedbackSampleRate",
    "ApplicationFailureFeedbackRoleArn",
})
_FIFO_ONLY = frozenset({"ContentBasedDeduplication", "FifoThroughputScope", "ArchivePolicy"})
_BOOLEANS = frozenset({"ContentBasedDeduplication"})
# The IAM actions a topic policy may grant (AddPermission's ActionName).
SNS_ACTIONS = frozenset({
    "GetTopicAttributes", "SetTopicAttributes", "AddPermission", "RemovePermission", "DeleteTopic", "Subscribe",
    "ListSubscriptionsByTopic", "Publish", "Receive", "ConfirmSubscription", "Unsubscribe",
    "GetSubscriptionAttributes", "SetSubscriptionAttributes", "TagResource", "UntagResource",
    "ListTagsForResource", "ListTopics", "ListSubscriptions", "CreateTopic",
})
_DEFAULT_ACTIONS = ["SNS:GetTopicAttributes", "SNS:SetTopicAttributes", "SNS:AddPermission", "SNS:RemovePermission",
                    "SNS:DeleteTopic", "SNS:Subscribe", "SNS:ListSubscriptionsByTopic", "SNS:Publish"]
EFFECTIVE_DELIVERY_POLICY = json.dumps({"http": {
    "defaultHealthyRetryPolicy": {"minDelayTarget": 20, "maxDelayTarget": 20, "numRetries": 3,
                                  "numMaxDelayRetries": 0, "numNoDelayRetries": 0, "numMinDelayRetries": 0,
                                  "backoffFunction": "linear"},
    "disableSubscriptionOverrides": False,
    "defaultRequestPolicy": {"headerContentType": "text/plain; charset=UTF-8"}}}, separators=(",", ":"))
MAX_TAGS = 50


def default_policy(topic: Topic) -> str:
    return json.dumps({"Version": "2008-10-17", "Id": "__default_policy_ID", "Statement": [{
        "Sid": "__default_statement_ID", "Effect": "Allow", "Principal": {"AWS": "*"}, "Action": _DEFAULT_ACTIONS,
        "Resource": topic.arn, "Condition": {"StringEquals": {"AWS:SourceOwner": topic.account}}}]},
        separators=(",", ":"))


def _attribute_value(name: str, value: Any, fifo: bool, prefix: str) -> str:
    """The value to store, or AWS's InvalidParameter."""
    if name not in SETTABLE or (name in _FIFO_ONLY and not fifo):
        raise invalid("AttributeName")
    value = "" if value is None else str(value)
    if name in _BOOLEANS:
        if value.lower() not in ("true", "false"):
            raise invalid(f"{prefix}{name}: Invalid value [{value}]. Must be true or false.")
        return value.lower()
    if name == "SignatureVersion" and value not in ("1", "2"):
        raise invalid(f"{prefix}SignatureVersion: Invalid value [{value}]. Please use either 1 or 2")
    if name == "Policy":
        try:
            document = filter_policy.parse_json(value)
        except ValueError:
            document = None
        if not isinstance(document, dict) or not isinstance(document.get("Statement"), (list, dict)):
            raise invalid(f"{prefix}Policy: failed to parse JSON")
    return value


def _tags(raw: Any) -> dict[str, str]:
    if raw in (None, ""):
        return {}
    if not isinstance(raw, list):
        raise invalid("Tags")
    tags: dict[str, str] = {}
    for tag in raw:
        key = tag.get("Key") if isinstance(tag, dict) else None
        value = tag.get("Value", "") if isinstance(tag, dict) else None
        if not isinstance(key, str) or not 1 <= len(key) <= 128 or not isinstance(value, str) or len(value) > 256:
            raise invalid("Tags")
        if key in tags:
            raise invalid("Duplicated keys are not allowed.")
        tags[key] = value
    if len(tags) > MAX_TAGS:
        raise invalid("Tags Reason: Could not complete request: tag quota of per resource exceeded")
    return tags


async def create_topic(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    name = p.get("Name")
    if not isinstance(name, str):
        raise invalid("Topic Name")
    raw = p.get("Attributes") or {}
    if not isinstance(raw, dict):
        raise invalid("Attributes")
    fifo = str(raw.get("FifoTopic", "")).lower() == "true"
    if "FifoTopic" in raw and str(raw["FifoTopic"]).lower() not in ("true", "false"):
        raise invalid("Attributes Reason: FifoTopic: Invalid value. Must be true or false.")
    supplied = {k: _attribute_value(k, v, fifo, "Attributes Reason: ") for k, v in raw.items() if k != "FifoTopic"}
    tags = _tags(p.get("Tags"))
    check_topic_name(name, fifo)
    stored = dict(supplied)
    if fifo:
        stored = {"FifoTopic": "true", "ContentBasedDeduplication": "false", **stored}

    def check_existing(existing: Topic) -> None:
        if fifo != existing.fifo:
            raise invalid("Topic Name")
        if any(existing.attributes.get(k) != v for k, v in supplied.items()):
            raise invalid("Attributes Reason: Topic already exists with different attributes")
        if p.get("Tags") not in (None, "") and tags != existing.tags:
            raise invalid("Tags Reason: Topic already exists with different tags")

    topic = await engine.topics.create_topic(ctx.region, ctx.account, name, fifo, stored, tags, check_existing)
    return {"TopicArn": topic.arn}


async def delete_topic(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    try:
        topic = topic_of(engine, ctx, p)
    except errors.TopicNotFound:
        return {}  # idempotent, as AWS's
    await engine.topics.delete_topic(topic)
    return {}


async def list_topics(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    topics, token = page(engine.topics.listed(ctx.region, ctx.account), p.get("NextToken"), lambda t: t.arn)
    return {"Topics": [{"TopicArn": t.arn} for t in topics], "NextToken": token}


def topic_attributes(engine: QueueEngine, topic: Topic) -> dict[str, str]:
    confirmed = len(engine.topics.subscriptions(topic))
    attributes = {"Policy": default_policy(topic), "Owner": topic.account, "SubscriptionsPending": "0",
                  "TopicArn": topic.arn, "EffectiveDeliveryPolicy": EFFECTIVE_DELIVERY_POLICY,
                  "SubscriptionsConfirmed": str(confirmed), "DisplayName": "", "SubscriptionsDeleted": "0"}
    attributes.update(topic.attributes)
    return attributes


async def get_topic_attributes(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    return {"Attributes": topic_attributes(engine, topic_of(engine, ctx, p))}


async def set_topic_attributes(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    topic = topic_of(engine, ctx, p)
    name = text(p, "AttributeName", required=True)
    assert name is not None
    value = _attribute_value(name, p.get("AttributeValue"), topic.fifo, "")

    def change(attributes: dict[str, str], tags: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
        attributes[name] = value
        if name == "Policy" and not value:
            attributes.pop(name)
        return attributes, tags

    await engine.topics.update_topic(topic, change)
    return {}


def _tagged(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> Topic:
    arn = text(p, "ResourceArn", required=True)
    assert arn is not None
    try:
        return find_topic(engine, ctx, arn, "ResourceArn")
    except errors.TopicNotFound:
        raise errors.TaggedResourceNotFound("Resource does not exist") from None


async def tag_resource(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    topic = _tagged(engine, ctx, p)
    new = _tags(p.get("Tags"))

    def change(attributes: dict[str, str], tags: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
        merged = {**tags, **new}
        if len(merged) > MAX_TAGS:
            raise invalid("Tags Reason: Could not complete request: tag quota of per resource exceeded")
        return attributes, merged

    await engine.topics.update_topic(topic, change)
    return {}


async def untag_resource(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    topic = _tagged(engine, ctx, p)
    keys = p.get("TagKeys") or []
    if not isinstance(keys, list):
        raise invalid("TagKeys")
    await engine.topics.update_topic(topic, lambda a, tags: (a, {k: v for k, v in tags.items() if k not in keys}))
    return {}


async def list_tags_for_resource(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    topic = _tagged(engine, ctx, p)
    return {"Tags": [{"Key": k, "Value": v} for k, v in sorted(topic.tags.items())]}


async def add_permission(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    """A statement allowing the accounts the actions, appended to the topic's policy (as AWS writes it)."""
    topic = topic_of(engine, ctx, p)
    label = text(p, "Label", required=True)
    accounts, actions = p.get("AWSAccountId") or [], p.get("ActionName") or []
    if not isinstance(accounts, list) or not accounts or not isinstance(actions, list) or not actions:
        raise invalid("AWSAccountId" if not accounts else "ActionName")
    if any(a not in SNS_ACTIONS for a in actions):
        raise invalid("Policy statement action out of service scope!")
    principals = [f"arn:aws:iam::{a}:root" for a in accounts]
    named = [f"SNS:{a}" for a in actions]
    statement = {"Sid": label, "Effect": "Allow",
                 "Principal": {"AWS": principals[0] if len(principals) == 1 else principals},
                 "Action": named[0] if len(named) == 1 else named, "Resource": topic.arn}

    def change(attributes: dict[str, str], tags: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
        policy = json.loads(attributes.get("Policy") or default_policy(topic))
        statements = policy.setdefault("Statement", [])
        if any(s.get("Sid") == label for s in statements):
            raise invalid("Statement already exists")
        statements.append(statement)
        attributes["Policy"] = json.dumps(policy, separators=(",", ":"))
        return attributes, tags

    await engine.topics.update_topic(topic, change)
    return {}


async def remove_permission(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    topic = topic_of(engine, ctx, p)
    label = text(p, "Label", required=True)

    def change(attributes: dict[str, str], tags: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
        policy = json.loads(attributes.get("Policy") or default_policy(topic))
        policy["Statement"] = [s for s in policy.get("Statement", []) if s.get("Sid") != label]
        attributes["Policy"] = json.dumps(policy, separators=(",", ":"))
        return attributes, tags

    await engine.topics.update_topic(topic, change)
    return {}

