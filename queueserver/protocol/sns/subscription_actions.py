"""Subscribe (protocol sqs: a queue of this server, by ARN, confirmed at once), Unsubscribe, the lists
and the subscription attributes, with AWS's texts. Every other protocol is refused as AWS refuses a
protocol it does not support (docs/sns.md)."""

from __future__ import annotations

import json
import random
from typing import Any

from queueserver import errors
from queueserver.models import Topic, TopicSubscription, uuid4_string
from queueserver.protocol.params import RequestContext
from queueserver.protocol.sns import filter_policy
from queueserver.protocol.sns.names import invalid, is_queue_arn, page, subscription_of, text, topic_of
from queueserver.storage import QueueEngine

SETTABLE = frozenset({"RawMessageDelivery", "FilterPolicy", "FilterPolicyScope", "RedrivePolicy",
                      "DeliveryPolicy"})
_SCOPES = ("MessageAttributes", "MessageBody")
_DEFAULTS = {"RawMessageDelivery": "false", "FilterPolicyScope": "MessageAttributes"}
_random = random.SystemRandom()


def _checked(name: str, value: Any, prefix: str, topic: Topic | None, endpoint: str,
             scope: str = "MessageAttributes") -> str:
    """The value to store for a subscription attribute, or AWS's InvalidParameter (after `prefix`)."""
    if name not in SETTABLE:
        raise invalid("AttributeName")
    value = "" if value is None else str(value)
    if name == "RawMessageDelivery":
        if value.lower() not in ("true", "false"):
            raise invalid(f"{prefix}RawMessageDelivery: Invalid value [{value}]. Must be true or false.")
        return value.lower()
    if name == "FilterPolicyScope":
        if value not in _SCOPES:
            raise invalid(f"{prefix}FilterPolicyScope: Invalid value [{value}]. Please use either MessageBody or "
                          "MessageAttributes")
        return value
    if name == "FilterPolicy":
        if value:
            filter_policy.check(value, scope, prefix)
        return value
    if name == "RedrivePolicy":
        return _redrive_policy(value, prefix, topic, endpoint)
    try:
        filter_policy.parse_json(value)
    except ValueError as exc:
        raise invalid(f"{prefix}{name}: failed to parse JSON. {exc}") from None
    return value


def _redrive_policy(value: str, prefix: str, topic: Topic | None, endpoint: str) -> str:
    if not value:
        return value
    try:
        document = filter_policy.parse_json(value)
    except ValueError as exc:
        raise invalid(f"{prefix}RedrivePolicy: failed to parse JSON. {exc}") from None
    target = document.get("deadLetterTargetArn") if isinstance(document, dict) else None
    if not isinstance(target, str) or not is_queue_arn(target):
        raise invalid(f"{prefix}RedrivePolicy: deadLetterTargetArn is an invalid arn")
    if topic is not None and topic.fifo and endpoint.endswith(".fifo") and not target.endswith(".fifo"):
        raise invalid(f"{prefix}RedrivePolicy: must use a FIFO queue as DLQ for a FIFO Subscription to a FIFO Topic.")
    return value


def _attributes(raw: Any, topic: Topic, endpoint: str) -> dict[str, str]:
    if raw in (None, ""):
        return {}
    if not isinstance(raw, dict):
        raise invalid("Attributes")
    scope = str(raw.get("FilterPolicyScope") or "MessageAttributes")
    prefix = "Attributes Reason: "
    return {name: _checked(name, value, prefix, topic, endpoint, scope) for name, value in raw.items()}


async def subscribe(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    topic = topic_of(engine, ctx, p)
    protocol = text(p, "Protocol", required=True)
    assert protocol is not None
    if protocol != "sqs":
        raise invalid(f"Amazon SNS does not support this protocol string: {protocol}")
    endpoint = p.get("Endpoint")
    if not isinstance(endpoint, str) or not is_queue_arn(endpoint):
        raise invalid("SQS endpoint ARN")
    if endpoint.endswith(".fifo") and not topic.fifo:
        raise invalid("Invalid parameter: Endpoint Reason: FIFO SQS Queues can not be subscribed to standard "
                      "SNS topics")
    attributes = _attributes(p.get("Attributes"), topic, endpoint)

    def check_existing(existing: TopicSubscription) -> None:
        for name, value in attributes.items():
            if existing.attributes.get(name, _DEFAULTS.get(name)) != value:
                raise invalid("Attributes Reason: Subscription already exists with different attributes")

    arn = f"{topic.arn}:{uuid4_string(_random)}"
    principal = f"arn:aws:iam::{ctx.account}:root" if ctx.caller is None else ctx.caller.key.arn
    created = await engine.topics.subscribe(topic, arn, protocol, endpoint, ctx.account, principal, attributes,
                                            check_existing)
    return {"SubscriptionArn": created.arn}


async def confirm_subscription(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    """Every subscription this server makes is confirmed at once: no token it handed out can be confirmed."""
    topic_of(engine, ctx, p)
    text(p, "Token", required=True)
    raise invalid("Token")


async def unsubscribe(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    subscription = subscription_of(engine, p)
    if subscription is not None:
        await engine.topics.unsubscribe(subscription)
    return {}  # idempotent, as AWS's


def _listed(subscriptions: list[TopicSubscription], engine: QueueEngine, token: Any) -> dict[str, Any]:
    chosen, next_token = page(subscriptions, token, lambda s: s.arn)
    return {"Subscriptions": [{"SubscriptionArn": s.arn, "Owner": s.owner, "Protocol": s.protocol,
                               "Endpoint": s.endpoint, "TopicArn": engine.topics.topic_of(s).arn} for s in chosen],
            "NextToken": next_token}


async def list_subscriptions(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    return _listed(engine.topics.subscriptions(region=ctx.region, account=ctx.account), engine, p.get("NextToken"))


async def list_subscriptions_by_topic(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    topic = topic_of(engine, ctx, p)
    return _listed(engine.topics.subscriptions(topic), engine, p.get("NextToken"))


def _existing(engine: QueueEngine, p: dict[str, Any]) -> TopicSubscription:
    subscription = subscription_of(engine, p)
    if subscription is None:
        raise errors.TopicNotFound("Subscription does not exist")
    return subscription


async def get_subscription_attributes(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    s = _existing(engine, p)
    attributes = {"ConfirmationWasAuthenticated": "true", "Endpoint": s.endpoint, "Owner": s.owner,
                  "PendingConfirmation": "false", "Protocol": s.protocol, "RawMessageDelivery": "false",
                  "SubscriptionArn": s.arn, "SubscriptionPrincipal": s.principal,
                  "TopicArn": engine.topics.topic_of(s).arn}
    attributes.update({k: v for k, v in s.attributes.items() if v != ""})
    if "FilterPolicy" not in attributes:  # shown only once a filter policy exists, as AWS does
        attributes.pop("FilterPolicyScope", None)
    return {"Attributes": attributes}


async def set_subscription_attributes(engine: QueueEngine, ctx: RequestContext, p: dict[str, Any]) -> dict[str, Any]:
    s = _existing(engine, p)
    name = text(p, "AttributeName", required=True)
    assert name is not None
    topic = engine.topics.topic_of(s)
    scope = s.attributes.get("FilterPolicyScope", "MessageAttributes")
    value = _checked(name, p.get("AttributeValue"), "", topic, s.endpoint, scope)
    if name == "FilterPolicyScope" and s.attributes.get("FilterPolicy"):
        _checked("FilterPolicy", s.attributes["FilterPolicy"], "", topic, s.endpoint, value)

    def change(attributes: dict[str, str]) -> dict[str, str]:
        attributes[name] = value
        return attributes

    await engine.topics.update_subscription(s, change)
    return {}
